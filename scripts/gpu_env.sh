# Sourced by scripts/gpu_*.sh: python3 of the GPU machine, the wheels carried in .whl/ (installed into
# /tmp/site), and litlab from this checkout without pip (scripts/gpu_sitecustomize.py: the machine's Python
# is 3.12, pyproject asks for 3.11). Sets PY, LITLAB_ROOT and PYTHONPATH; compiles kernels for real.
LITLAB_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PY=${PYTHON:-python3}
GPU_SITE=${GPU_SITE:-/tmp/site}
mkdir -p "$GPU_SITE"
if ls "$LITLAB_ROOT"/.whl/*.whl >/dev/null 2>&1; then
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$GPU_SITE" \
    "$LITLAB_ROOT"/.whl/*.whl || echo "gpu_env: installing .whl/ failed" >&2
fi
cp "$LITLAB_ROOT/scripts/gpu_sitecustomize.py" "$GPU_SITE/sitecustomize.py"
export LITLAB_ROOT PY
export PYTHONPATH=$GPU_SITE:$LITLAB_ROOT/src${PYTHONPATH:+:$PYTHONPATH}
export WANDB_MODE=disabled PYTHONUNBUFFERED=1
unset TRITON_INTERPRET
"$PY" -c "import hydra, omegaconf, litlab.configs, litlab.kernels, litlab.train, litlab.run" ||
  echo "gpu_env: litlab does not import (see above)" >&2
