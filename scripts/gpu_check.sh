#!/usr/bin/env bash
# GPU readiness in one command (about 5 minutes on one GPU, at most 8): see scripts/gpu_check.py.
#   bash scripts/gpu_check.sh [out folder] [gpu_check.py flags]     -> <out>/gpu_check.json
# On a machine without network access, missing packages can be carried as wheels in .whl/ (see
# scripts/gpu_env.sh); litlab itself is imported from this checkout.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-${OUT:-gpu_check}}
source scripts/gpu_env.sh
timeout 480 "$PY" scripts/gpu_check.py --out "$out" "${@:2}"
