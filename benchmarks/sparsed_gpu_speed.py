"""GPU: dense SDPA (FlashAttention) vs compiled flex_attention with SparseD's BlockMask vs the Triton
block-sparse kernel vs the torch gather kernel, at 16k/32k/64k tokens, ρ = 0.3, b = 128, bf16, one (1, 8, L,
128) attention; plus a correctness check of every sparse kernel against dense attention under the mask.
Run by ``scripts/gpu_sparsed.sh`` (under 5 minutes on one H100/H200-class GPU).

Writes benchmarks/results/sparsed_gpu_speed.json (or ``--out``).
"""

from __future__ import annotations

import argparse
import json
import os
from functools import partial
from pathlib import Path

import torch
from torch.nn import functional as F
from torch.nn.attention.flex_attention import flex_attention

from litlab.core.machine import machine_info
from litlab.kernels.block_sparse_attention import (
    dense_block_attention,
    flex_block_mask,
    gather_block_attention,
)
from litlab.kernels.block_sparse_attention_triton import triton_block_attention
from litlab.methods.sparsed.selection import select_pattern

RESULTS = Path(__file__).resolve().parent / "results"


def cuda_ms(run, repeats: int = 10) -> float:
    """Median milliseconds of ``run()`` by CUDA events, after three warm-up calls (compilation)."""
    for _ in range(3):
        run()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        run()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    return sorted(times)[len(times) // 2]


def correctness() -> dict[str, float]:
    """Max abs error of each sparse kernel against dense attention under the mask (fp32, 2k tokens, blocks
    of 128: compiled flex_attention needs the BlockMask's block to be a multiple of its tile, 128 on an H200
    in torch 2.11, which refused blocks of 64)."""
    gen = torch.Generator(device="cuda").manual_seed(0)
    q, k, v = (torch.randn(1, 4, 2048, 64, device="cuda", generator=gen) for _ in range(3))
    mask = select_pattern(q, k, 128, 0.3)
    ref = dense_block_attention(q, k, v, mask, 128)
    block_mask = flex_block_mask(mask, 128, 2048, 2048, 1, 4)
    return {
        "gather": (gather_block_attention(q, k, v, mask, 128) - ref).abs().max().item(),
        "flex_compiled": (torch.compile(flex_attention)(q, k, v, block_mask=block_mask) - ref)
        .abs()
        .max()
        .item(),
        "triton_tf32": (triton_block_attention(q, k, v, mask, 128) - ref).abs().max().item(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[16384, 32768, 65536])
    parser.add_argument("--out", type=Path, default=RESULTS / "sparsed_gpu_speed.json")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit(
            "sparsed_gpu_speed needs a CUDA GPU; on a CPU run benchmarks/sparsed_attention_speed.py"
        )
    errors = correctness()
    print("max abs error vs dense:", errors)
    rows: list[dict] = []
    result = {
        "benchmark": "sparsed_gpu_speed",
        "machine": machine_info(),
        "gpu": torch.cuda.get_device_name(0),
        "torch": torch.__version__,
        "rho": 0.3,
        "block": 128,
        "errors_vs_dense": errors,
        "rows": rows,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)

    def write() -> None:
        """The result so far (after every length, so a run stopped by a time limit keeps its rows)."""
        args.out.write_text(json.dumps(result | {"load_average": os.getloadavg()}, indent=2) + "\n")

    write()
    compiled_flex = torch.compile(flex_attention)
    for length in args.lengths:
        gen = torch.Generator(device="cuda").manual_seed(length)
        q, k, v = (
            torch.randn(1, 8, length, 128, device="cuda", generator=gen, dtype=torch.bfloat16)
            for _ in range(3)
        )
        mask = select_pattern(q, k, 128, 0.3, isolated=False)
        block_mask = flex_block_mask(mask, 128, length, length, 1, 8)
        row = {"length": length, "density": mask.float().mean().item()}
        contenders = {
            "sdpa": partial(F.scaled_dot_product_attention, q, k, v),
            "flex": partial(compiled_flex, q, k, v, block_mask=block_mask),
            "triton": partial(triton_block_attention, q, k, v, mask, 128),
            "gather": partial(gather_block_attention, q, k, v, mask, 128, q_block_chunk=32),
        }
        row |= {f"{name}_ms": cuda_ms(run) for name, run in contenders.items()}
        for name in ("flex", "triton", "gather"):
            row[f"{name}_speedup"] = row["sdpa_ms"] / row[f"{name}_ms"]
        print(row, flush=True)
        rows.append(row)
        write()
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
