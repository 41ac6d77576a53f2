#!/usr/bin/env bash
# SparseD's GPU check (prepared; needs one CUDA GPU, under 5 minutes on an H100/H200-class card):
# the Triton kernel's tests, then dense SDPA vs compiled flex_attention vs the Triton and gather
# block-sparse kernels at 16k/32k/64k tokens (rho = 0.3, b = 128, bf16), with errors against dense attention.
#   bash scripts/gpu_sparsed.sh            # writes benchmarks/results/sparsed_gpu_speed.json (or $OUT/ if set)
set -euo pipefail
cd "$(dirname "$0")/.."
OUT_DIR=${OUT:-benchmarks/results}
source scripts/gpu_env.sh
nvidia-smi --query-gpu=name,memory.total --format=csv
timeout 120 "$PY" -m pytest tests/kernels/test_block_sparse_attention.py -q -p no:cacheprovider
timeout 240 "$PY" benchmarks/sparsed_gpu_speed.py --out "$OUT_DIR/sparsed_gpu_speed.json"
