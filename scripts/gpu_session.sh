#!/usr/bin/env bash
# Every GPU check of this checkout in one command on one GPU machine, within 8 minutes on an H200: each
# part under its own time limit (and the session's), a failed part never stopping the next.
#   bash scripts/gpu_session.sh [out folder]          (default: $OUT, else gpu_session/)
# Parts: gpu_check.py --quick (training bf16/DDP/FSDP, the Fitter, compiled kernels vs torch; <= 240 s),
# SparseD's SDPA vs flex vs Triton at 16k-64k (<= 120 s), the SkyEvents 3DGS rasteriser (<= 45 s), the
# trainer overhead on the GPU (what is left, >= 45 s). Writes into <out>, flat: gpu_check.json,
# sparsed_gpu_speed.json, skyevents_gpu.json, trainer_overhead_gpu.json, gpu_session.json (each part's
# exit code and seconds) and gpu_session.log (all output); run folders stay in $WORK (/tmp/gpu_session).
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:-${OUT:-gpu_session}}
mkdir -p "$out"
out=$(cd "$out" && pwd)
WORK=${WORK:-/tmp/gpu_session}
BUDGET=${BUDGET:-470}  # seconds for all parts together, setup included

session() {
  local start=$SECONDS parts=()
  date -u
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv || true
  source scripts/gpu_env.sh
  "$PY" -c "import sys, torch, triton, lightning, hydra; print(sys.version.split()[0], torch.__version__, triton.__version__, lightning.__version__, hydra.__version__)"
  mkdir -p "$WORK"

  # part NAME CAP COMMAND...: run COMMAND for at most CAP seconds (0: all that is left), record how it ended
  part() {
    local name=$1 cap=$2 left limit began rc
    shift 2
    left=$((BUDGET - (SECONDS - start)))
    limit=$(( cap > 0 && cap < left ? cap : left ))
    if (( limit < 15 )); then
      echo "=== $name: skipped, ${left} s left"
      parts+=("\"$name\": {\"exit_code\": null, \"seconds\": 0, \"limit_s\": 0}")
      return
    fi
    echo "=== $name (limit ${limit} s) $(date -u +%T)"
    began=$SECONDS
    timeout -k 5 "$limit" "$@"
    rc=$?
    echo "=== $name: exit code $rc$( ((rc == 124)) && echo ' (time limit)') after $((SECONDS - began)) s"
    parts+=("\"$name\": {\"exit_code\": $rc, \"seconds\": $((SECONDS - began)), \"limit_s\": $limit}")
  }

  part gpu_check 240 "$PY" scripts/gpu_check.py --quick --budget 225 --out "$WORK/gpu_check"
  cp "$WORK/gpu_check/gpu_check.json" "$out/" 2>/dev/null
  part sparsed_gpu_speed 120 "$PY" benchmarks/sparsed_gpu_speed.py --out "$out/sparsed_gpu_speed.json"
  part skyevents_gpu 45 "$PY" benchmarks/skyevents_gpu.py --out "$out/skyevents_gpu.json"
  touch "$WORK/before_trainer_overhead"
  part trainer_overhead_gpu 0 "$PY" benchmarks/trainer_overhead.py --device cuda
  for f in benchmarks/results/trainer_overhead{,_quick}_cuda.json; do  # only a file this run wrote
    [ "$f" -nt "$WORK/before_trainer_overhead" ] && cp "$f" "$out/trainer_overhead_gpu.json"
  done

  local IFS=,
  echo "{${parts[*]}, \"total_s\": $((SECONDS - start))}" >"$out/gpu_session.json"
  echo "=== summary ($((SECONDS - start)) s)"
  cat "$out/gpu_session.json"
  "$PY" scripts/gpu_summary.py "$out" || true
}

session 2>&1 | tee "$out/gpu_session.log"
