"""Veracity Search speed: batched scoring of all 2^n assignments against scoring one assignment at a time
(a plain loop over sequences, the straightforward implementation), and on deeper chains (6-7 steps) the
Metropolis search against exhaustive enumeration (assignments scored, wall time, how often it finds the
exhaustive optimum, reward gap). Uses the study's substrate LM of seed 10 (cached; trained on first use).
Writes ``benchmarks/results/veracity_search.json``.

    python benchmarks/veracity_search.py [--chains 40] [--lm-steps 1000]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

from litlab.core.machine import machine_info
from litlab.datamodules.prontoqa import ProblemConfig, generate_problems
from litlab.fitting import Fitter
from litlab.methods.veracity.scoring import assignment_scores, lm_score_fn
from litlab.methods.veracity.search import all_assignments, exhaustive_search, metropolis_search
from litlab.methods.veracity.substrate import substrate_lm

OUT = Path(__file__).resolve().parent / "results" / "veracity_search.json"


def timed(fn):  # noqa: ANN001, ANN201 - a tiny helper: (result, process seconds)
    start = time.process_time()
    result = fn()
    return result, time.process_time() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--chains", type=int, default=40)
    parser.add_argument("--lm-steps", type=int, default=1000)
    args = parser.parse_args()
    torch.set_num_threads(1)
    lm = substrate_lm(Fitter(), seed=10, steps=args.lm_steps)
    short = generate_problems(args.chains, ProblemConfig(depth_min=4, depth_max=4), seed=77)
    width = short["slots"].shape[1]
    candidates = all_assignments(width, width)[None].expand(args.chains, -1, -1)
    batched, t_batched = timed(lambda: assignment_scores(lm, short, candidates))
    few = min(4, args.chains)  # the loop is slow: time it on the first chains' assignments, per assignment
    sub = {k: v[:few] for k, v in short.items()}

    def loop() -> torch.Tensor:
        return torch.stack(
            [
                torch.cat(
                    [
                        assignment_scores(
                            lm, {k: v[i : i + 1] for k, v in sub.items()}, candidates[i : i + 1, j : j + 1]
                        )
                        for j in range(candidates.shape[1])
                    ],
                    1,
                )[0]
                for i in range(few)
            ]
        )

    looped, t_loop = timed(loop)
    assert torch.allclose(looped, batched[:few], atol=1e-4)
    n_batched, n_loop = batched.numel(), looped.numel()
    deep = generate_problems(args.chains, ProblemConfig(depth_min=5, depth_max=6), seed=78)
    score = lm_score_fn(lm, deep)
    exact, t_exact = timed(lambda: exhaustive_search(score, deep["n_steps"], deep["slots"].shape[1]))
    rows = []
    for iterations in (8, 16, 32):
        found, t_found = timed(
            lambda it=iterations: metropolis_search(
                score, deep["n_steps"], deep["slots"].shape[1], iterations=it, restarts=2
            )
        )
        rows.append(
            {
                "iterations": iterations,
                "restarts": 2,
                "assignments_per_chain": float(found.scored.float().mean()),
                "seconds": t_found,
                "finds_exhaustive_optimum": float(
                    (found.assignment == exact.assignment).all(1).float().mean()
                ),
                "mean_reward_gap": float((exact.score - found.score).mean()),
            }
        )
    result = {
        "machine": machine_info(),
        "lm": {"seed": 10, "steps": args.lm_steps, "arch": "2 x d64 LLaMA"},
        "scoring_5_step_chains": {
            "batched_assignments_per_s": n_batched / t_batched,
            "loop_assignments_per_s": n_loop / t_loop,
            "speedup": (n_batched / t_batched) / (n_loop / t_loop),
        },
        "deeper_chains_6_7_steps": {
            "exhaustive": {"assignments_per_chain": float(exact.scored.float().mean()), "seconds": t_exact},
            "metropolis": rows,
        },
        "timing": "process CPU seconds on one thread",
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
