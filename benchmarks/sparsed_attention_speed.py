"""SparseD's block-sparse attention (the pure-torch gather kernel) against dense
``scaled_dot_product_attention`` at 4k, 8k and 16k tokens on a CPU, and end-to-end SparseD decoding against
dense decoding on a long prompt.

Kernel: one (1, H = 4, L, d = 64) fp32 attention, block b = 128, ρ = 0.3: every (head, query block) keeps
⌊n·ρ⌋ + 1 key blocks chosen by SparseD's selection on the same random queries and keys. The contenders take
turns in every repeat, so a change of load hits both alike; reported: median wall time and median thread
CPU time (the latter hardly moves with the machine's load). The gather kernel runs two query blocks at a time
(``q_block_chunk=2``: the gathered keys stay in cache; 16 at a time was 1.3x at 16k, 2 at a time 1.9x).
Decoding: a random 2-layer d = 64 masked-diffusion LLaMA, a 4k prompt, 128 tokens in 16 steps (s = 0.2,
ρ = 0.3, b = 128): the whole sampler.

Run:  python benchmarks/sparsed_attention_speed.py [--quick | --smoke]
Writes benchmarks/results/sparsed_attention_speed.json (``--quick``: 4k only, ..._quick.json; ``--smoke``: 1k
and a 256-token prompt, ..._smoke.json).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import torch
from _smoke import SMOKE_HELP, suffix
from torch.nn import functional as F

from litlab.core.machine import machine_info
from litlab.kernels.block_sparse_attention import gather_block_attention
from litlab.lm import build_lm, llama_config
from litlab.methods.sparsed.decoding import generate
from litlab.methods.sparsed.selection import select_pattern

RESULTS = Path(__file__).resolve().parent / "results"
TARGET_SPEEDUP_16K = 1.5


def interleaved(contenders: dict[str, Callable[[], object]], repeats: int) -> dict[str, dict[str, float]]:
    """Median wall and thread-CPU seconds of each contender, taking turns in each repeat (after a warm-up)."""
    for run in contenders.values():
        run()
    wall: dict[str, list[float]] = {name: [] for name in contenders}
    cpu: dict[str, list[float]] = {name: [] for name in contenders}
    for _ in range(repeats):
        for name, run in contenders.items():
            start_wall, start_cpu = time.perf_counter(), time.thread_time()
            run()
            cpu[name].append(time.thread_time() - start_cpu)
            wall[name].append(time.perf_counter() - start_wall)
    return {n: {"wall_s": statistics.median(wall[n]), "cpu_s": statistics.median(cpu[n])} for n in contenders}


@torch.no_grad()
def kernel_row(length: int, rho: float, block: int, repeats: int) -> dict:
    """Dense SDPA vs the gather kernel on one length, with SparseD's selected pattern."""
    gen = torch.Generator().manual_seed(length)
    q, k, v = (torch.randn(1, 4, length, 64, generator=gen) for _ in range(3))
    pattern = select_pattern(q, k, block, rho, isolated=False)
    times = interleaved(
        {
            "dense_sdpa": lambda: F.scaled_dot_product_attention(q, k, v),
            "sparsed_gather": lambda: gather_block_attention(q, k, v, pattern, block, q_block_chunk=2),
        },
        repeats,
    )
    error = (gather_block_attention(q, k, v, pattern, block) - F.scaled_dot_product_attention(q, k, v)).abs()
    return {
        "length": length,
        "block": block,
        "rho": rho,
        "density": pattern.float().mean().item(),
        "times": times,
        "speedup_wall": times["dense_sdpa"]["wall_s"] / times["sparsed_gather"]["wall_s"],
        "speedup_cpu": times["dense_sdpa"]["cpu_s"] / times["sparsed_gather"]["cpu_s"],
        "max_abs_change_vs_dense": error.max().item(),
    }


def decoding_row(prompt_length: int, repeats: int) -> dict:
    """Dense vs SparseD decoding of 128 tokens in 16 steps after a ``prompt_length`` prompt."""
    torch.manual_seed(0)
    config = llama_config(
        259,
        hidden_size=64,
        num_layers=2,
        num_heads=4,
        mask_token_id=2,
        max_position_embeddings=prompt_length + 128,
    )
    model = build_lm(config, "masked_diffusion").eval()
    prompt = torch.randint(3, 259, (1, prompt_length), generator=torch.Generator().manual_seed(1))
    settings = {"gen_length": 128, "steps": 16, "block_length": 128}
    times = interleaved(
        {
            "dense": lambda: generate(model, prompt, attention="dense", **settings),
            "sparsed": lambda: generate(model, prompt, s=0.2, rho=0.3, block=128, **settings),
        },
        repeats,
    )
    out = generate(model, prompt, s=0.2, rho=0.3, block=128, **settings)
    return {
        "prompt_length": prompt_length,
        **settings,
        "s": 0.2,
        "rho": 0.3,
        "block": 128,
        "density": out.density,
        "attention_cost": out.attention_cost,
        "times": times,
        "speedup_wall": times["dense"]["wall_s"] / times["sparsed"]["wall_s"],
        "speedup_cpu": times["dense"]["cpu_s"] / times["sparsed"]["cpu_s"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="4k only, one repeat")
    parser.add_argument("--smoke", action="store_true", help=SMOKE_HELP)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(1)
    lengths = [1024] if args.smoke else [4096] if args.quick else [4096, 8192, 16384]
    repeats = 1 if args.quick or args.smoke else args.repeats
    kernels = [kernel_row(length, 0.3, 128, repeats) for length in lengths]
    for row in kernels:
        print(
            f"L={row['length']:>6}: dense {row['times']['dense_sdpa']['cpu_s']:.3f} s, gather "
            f"{row['times']['sparsed_gather']['cpu_s']:.3f} s CPU, speed-up {row['speedup_cpu']:.2f}x "
            f"(wall {row['speedup_wall']:.2f}x), density {row['density']:.3f}"
        )
    decoding = decoding_row(256 if args.smoke else 1024 if args.quick else 4096, repeats)
    print(f"decoding {decoding['prompt_length']}+128: speed-up {decoding['speedup_cpu']:.2f}x CPU")
    last = kernels[-1]
    result = {
        "benchmark": "sparsed_attention_speed",
        "machine": machine_info(),
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "load_average": os.getloadavg(),
        "kernel": kernels,
        "decoding": decoding,
        "target": {
            "length": 16384,
            "speedup": TARGET_SPEEDUP_16K,
            "met": bool(last["length"] == 16384 and last["speedup_cpu"] >= TARGET_SPEEDUP_16K),
        },
    }
    name = f"sparsed_attention_speed{suffix(args)}.json"
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / name).write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {RESULTS / name}")


if __name__ == "__main__":
    main()
