"""Forward+backward time of CartanFM's Cartan losses: our vectorised forms against the official code's loops.

The official code computes the orthogonality form of L_Cartan with three nested Python loops over basis
pairs and targets (one Frobenius product per iteration); ours is one einsum per term. The projection form
(scale-free bracket residuals + k ⊥ p, our addition) is timed beside them. The contenders take turns in
every repeat, so a load change on the shared machine hits all alike; the median over repeats is reported.

Run:  python benchmarks/symspace_cartan_loss.py [--repeats 30]
Writes benchmarks/results/symspace_cartan_loss.json and prints a table.
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

from litlab.core.machine import machine_info
from litlab.methods.symspace.lie import LieBases, cartan_orthogonality, cartan_projection

RESULTS = Path(__file__).resolve().parent / "results"
SIZES = ((1, 2, 3), (5, 10, 10), (10, 20, 16))  # (n_k, n_p, m): the sphere problem, the paper's, larger


def looped_orthogonality(k: torch.Tensor, p: torch.Tensor) -> torch.Tensor:
    """The official code's loop structure: Σ over (pair, target) of ⟨[A, B], T⟩², averaged per term."""

    def term(pairs: list[tuple[torch.Tensor, torch.Tensor]], targets: torch.Tensor) -> torch.Tensor:
        total, count = k.new_zeros(()), 0
        for a, b in pairs:
            comm = a @ b - b @ a
            for t in targets:
                total = total + (comm * t).sum() ** 2
                count += 1
        return total / max(count, 1)

    kk = [(k[i], k[j]) for i in range(len(k)) for j in range(i + 1, len(k))]
    kp = [(a, b) for a in k for b in p]
    pp = [(p[i], p[j]) for i in range(len(p)) for j in range(i + 1, len(p))]
    return term(kk, p) + term(kp, k) + term(pp, p)


def step(loss: Callable[[torch.Tensor, torch.Tensor], torch.Tensor], bases: LieBases) -> Callable[[], None]:
    """One zero-grad, forward and backward of ``loss`` on the bases."""

    def run() -> None:
        bases.zero_grad(set_to_none=True)
        loss(bases.k, bases.p).backward()

    return run


def time_interleaved(steps: dict[str, Callable[[], None]], repeats: int) -> dict[str, float]:
    """Median milliseconds per call, the contenders taking turns in each repeat (after one warm-up each)."""
    for run in steps.values():
        run()
    times: dict[str, list[float]] = {name: [] for name in steps}
    for _ in range(repeats):
        for name, run in steps.items():
            start = time.perf_counter()
            run()
            times[name].append((time.perf_counter() - start) * 1e3)
    return {name: statistics.median(values) for name, values in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    rows = []
    for n_k, n_p, m in SIZES:
        torch.manual_seed(0)
        bases = LieBases(n_k, n_p, m)
        ours = float(sum(cartan_orthogonality(bases.k, bases.p).values()))
        torch.testing.assert_close(float(looped_orthogonality(bases.k, bases.p)), ours, rtol=1e-4, atol=1e-9)
        median = time_interleaved(
            {
                "orthogonality_vectorised": step(
                    lambda a, b: sum(cartan_orthogonality(a, b).values()), bases
                ),
                "orthogonality_official_loops": step(looped_orthogonality, bases),
                "projection_vectorised": step(lambda k, p: sum(cartan_projection(k, p).values()), bases),
            },
            args.repeats,
        )
        rows.append(
            {
                "n_k": n_k,
                "n_p": n_p,
                "m": m,
                **{f"{name}_ms": round(value, 4) for name, value in median.items()},
                "speedup_vs_loops": round(
                    median["orthogonality_official_loops"] / median["orthogonality_vectorised"], 1
                ),
            }
        )
        print(rows[-1], flush=True)
    out = {
        "benchmark": "symspace_cartan_loss",
        "what": "forward+backward of L_Cartan on the learnable bases, median ms over interleaved repeats",
        "repeats": args.repeats,
        "threads": args.threads,
        "load_average_1m": round(os.getloadavg()[0], 2),
        **machine_info(),
        "rows": rows,
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "symspace_cartan_loss.json").write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
