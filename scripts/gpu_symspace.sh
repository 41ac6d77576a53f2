#!/usr/bin/env bash
# CartanFM's sprite claim at 64x64 on one CUDA GPU (prepared, not yet run on a device): task=symspace/sprite_claim
# (CartanFM, FM-only, VAE, beta-VAE; early stopping on in-distribution validation; seeds 0-2), one case per
# run so that whatever the budget allows is kept: R2R case 0 (the poster's headline) first, then the others.
#   bash scripts/gpu_symspace.sh [out folder]      (default: $OUT, else results/symspace/sprite_claim_gpu)
# Env: BUDGET (seconds for every case together, default 540), STEPS (max steps per fit, default 4000),
# CASES (split:case in order, default all six), TRAINER (default gpu; cpu runs the same protocol here), EXTRA
# (more overrides, e.g. to shrink it for a test).
# Writes <out>/<split>_case<k>/ (tables/{runs,table,paper_vs_ours}.{csv,md}, results.json, plots) and <out>/cases.json
# (each case's exit code and seconds). Run it again on the same out folder to go on where the last budget ended:
# each case resumes (resume=auto) with its finished fits kept and the fit under way from its last validation.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:-${OUT:-results/symspace/sprite_claim_gpu}}
mkdir -p "$out"
out=$(cd "$out" && pwd)
BUDGET=${BUDGET:-540}
STEPS=${STEPS:-4000}
TRAINER=${TRAINER:-gpu}
EXTRA=${EXTRA:-}
if [ "$TRAINER" = gpu ]; then
  source scripts/gpu_env.sh
  nvidia-smi --query-gpu=name,memory.total --format=csv || true
else
  PY=${PYTHON:-python}
fi
start=$SECONDS
cases=()
for split_case in ${CASES:-r2r:0 r2r:1 r2r:2 r2e:0 r2e:1 r2e:2}; do
  split=${split_case%:*} case=${split_case#*:} left=$((BUDGET - (SECONDS - start)))
  if ((left < 30)); then
    echo "=== ${split} case ${case}: skipped, ${left} s left"
    continue
  fi
  echo "=== ${split} case ${case} (limit ${left} s)"
  began=$SECONDS
  # shellcheck disable=SC2086  # EXTRA is a list of overrides
  timeout -k 5 "$left" "$PY" -m litlab.run task=symspace/sprite_claim trainer="$TRAINER" \
    "task.splits=[${split}]" "task.cases=[${case}]" task.data.grid.image_size=64 \
    '~task.data.grid.n_scales' '~task.data.grid.n_orientations' '~task.data.grid.n_positions' \
    task.max_steps="$STEPS" task.early_stopping.every=250 task.early_stopping.patience=4 \
    task.early_stopping.min_steps=$((STEPS / 2)) \
    task.models.fm_only.unet_width=64 task.models.cartanfm.unet_width=64 \
    hydra.run.dir="$out/${split}_case${case}" resume=auto $EXTRA
  rc=$?
  cases+=("\"${split}_case${case}\": {\"exit_code\": $rc, \"seconds\": $((SECONDS - began))}")
done
IFS=,
echo "{${cases[*]}}" >"$out/cases.json"
cat "$out/cases.json"
