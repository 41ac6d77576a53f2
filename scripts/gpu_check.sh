#!/usr/bin/env bash
# GPU readiness in one command (about 5 minutes on one GPU, at most 8): see scripts/gpu_check.py.
#   bash scripts/gpu_check.sh [out folder]          -> <out>/gpu_check.json
# On a machine without network access, missing packages can be carried as wheels in .whl/ (they are
# installed into /tmp/site first); litlab itself is installed from this checkout without its dependencies.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-${OUT:-gpu_check}}
python=${PYTHON:-python3}
if [ -d .whl ] && ls .whl/*.whl >/dev/null 2>&1; then
  "$python" -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl
  export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
if ! "$python" -c "import litlab.kernels, litlab.train" 2>/dev/null; then
  "$python" -m pip install -q --no-index --no-deps --no-build-isolation -e .
fi
unset TRITON_INTERPRET   # compile the kernels for real
timeout 480 "$python" scripts/gpu_check.py --out "$out"
