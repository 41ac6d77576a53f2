#!/usr/bin/env bash
# CartanFM's sprite claim at 32x32 on a CPU (the symspace README's 32x32 study): task=symspace/sprite_claim on
# the 1536-combination grid drawn at 32x32, U-Net width 16, CartanFM / FM-only / VAE / beta-VAE, at most STEPS
# steps per fit, early stopping on in-distribution validation (every 400 steps, patience 5, not before 10000:
# raised from 4000 in stop 62, when 6 of the 18 recorded flow-matching fits had stopped before 10000, 4 of
# them on a dip of a curve still coming down; a run moves the fits that stopped before 10000 to
# fits/<case>/superseded/min_steps4000/ and fits them again, the rest being what the new rule makes too).
# One run folder per case, outputs/task/symspace/sprite_claim_32px/<split>_case<n>/, STREAMS cases at a time on
# one thread each (on 2 cores, 1.25x the throughput of one case on two threads). Seed-major: every case gets
# seed 0 before any gets seed 1, so a whole one-seed table comes first. When all cases finish, the collect task
# publishes one table with the paper beside ours to results/symspace/sprite_claim_32px/.
#   bash scripts/cpu_symspace_32px.sh        (about 50 hours of a 2-core machine at the defaults, less where
#                                            early stopping ends fits)
# Run it again to go on where it stopped: finished fits are read back, the fit under way continues from its
# last validation, and a larger STEPS continues the fits that reached the old one. Finished fits are kept in
# results/symspace/sprite_claim_32px_study/fits/ (commit them: a fresh clone then goes on from them; the
# state of a fit under way, *.ckpt, stays on the machine). Where it stands:
#   python -m litlab.methods.symspace.claim_status
# Env: STEPS (default 20000, the paper-scale cap: 12000 stopped most flow-matching fits still improving),
# CASES (split:case, default all six), SEEDS (phases, default "[0] [0,1] [0,1,2]"), STREAMS (default 2),
# THREADS (torch threads per stream, default 1; STREAMS=1 THREADS=2 runs one long fit about twice as fast:
# a CartanFM step took 0.34 s, against about 0.65 s measured on one thread beside another stream),
# MODELS (fit only these, e.g. "vae,beta_vae,fm_only"; then nothing is collected), EXTRA (more overrides,
# e.g. to shrink it for a test), PYTHON, LITLAB_ROOT (where outputs/ and results/ go, default the checkout).
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python}
STEPS=${STEPS:-20000}
STREAMS=${STREAMS:-2}
THREADS=${THREADS:-1}
MODELS=${MODELS:-}
EXTRA=${EXTRA:-}
only=()
[[ -n $MODELS ]] && only=("task.fit_only=[$MODELS]")
read -ra cases <<<"${CASES:-r2r:0 r2r:1 r2e:0 r2e:1 r2r:2 r2e:2}"
read -ra phases <<<"${SEEDS:-[0] [0,1] [0,1,2]}"
runs=${LITLAB_ROOT:-$PWD}/outputs/task/symspace/sprite_claim_32px
fits=${LITLAB_ROOT:-$PWD}/results/symspace/sprite_claim_32px_study/fits

run_case() { # split case seeds
  # shellcheck disable=SC2086  # EXTRA is a list of overrides
  "$PY" -m litlab.run task=symspace/sprite_claim task_name=symspace/sprite_claim_32px \
    "task.splits=[$1]" "task.cases=[$2]" "task.seeds=$3" task.data.grid.image_size=32 \
    task.max_steps="$STEPS" task.early_stopping.every=400 task.early_stopping.patience=5 \
    task.early_stopping.min_steps=10000 task.fits_dir="$fits" extras.torch_threads="$THREADS" \
    run_id="$1_case$2" resume=auto "${only[@]}" $EXTRA
}

stream() { # the cases $1, $1 + STREAMS, ... through every phase; fails if any run failed
  local failed=0 seeds i split case
  for seeds in "${phases[@]}"; do
    for ((i = $1; i < ${#cases[@]}; i += STREAMS)); do
      split=${cases[i]%:*} case=${cases[i]#*:}
      echo "=== $(date -u +%FT%TZ) ${split} case ${case} seeds ${seeds}"
      run_case "$split" "$case" "$seeds" || failed=1
    done
  done
  return $failed
}

pids=()
for ((s = 0; s < STREAMS; s++)); do
  stream "$s" &
  pids+=($!)
done
failed=0
for pid in "${pids[@]}"; do
  wait "$pid" || failed=1
done
if ((failed)); then
  echo "cpu_symspace_32px: a case failed (its error is above); run the script again to go on" >&2
  exit 1
fi
if [[ -n $MODELS ]]; then
  echo "cpu_symspace_32px: fitted only $MODELS; run it without MODELS to fit the rest and collect the table"
  exit 0
fi
folders=()
for split_case in "${cases[@]}"; do
  folders+=("$runs/${split_case%:*}_case${split_case#*:}")
done
IFS=,
"$PY" -m litlab.run task=symspace/sprite_claim_collect task_name=symspace/sprite_claim_32px \
  "task.runs=[${folders[*]}]" run_id=collected resume=auto publish=true
