"""Simulated quantized-SGD steps per second: the batched torch simulator against the naive numpy loop.

A "simulated step" is one SGD step of one (setting, seed) pair. Contenders, on the same workload:
- ``batched`` (float64 and float32): ``simulate`` running all settings × seeds as one tensor program;
- ``torch, one pair at a time``: the same simulator called per (setting, seed), as a loop over settings;
- ``numpy loop`` (the peer): ``reference.reference_sgd``, one setting and one seed at a time, drawing its
  noise step by step, the obvious implementation of the algorithm.
The loop-based contenders run a subset of the pairs (they scale linearly); contenders take turns within
each repeat, so load changes on a shared machine hit all alike; the median over repeats is reported.

Run:  python benchmarks/quantsgd_simulator_speed.py [--quick] [--threads 1]
Writes benchmarks/results/quantsgd_simulator_speed.json (``--quick``: ..._quick.json) and prints a table.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

from litlab.core.machine import machine_info
from litlab.methods.quantsgd.quantizers import Quantizer
from litlab.methods.quantsgd.reference import numpy_draw, reference_sgd
from litlab.methods.quantsgd.simulator import Problem, Setting, simulate

RESULTS = Path(__file__).resolve().parent / "results"


def workload(dim: int, batch: int) -> list[Setting]:
    """8 settings of one batch: additive data ε ∈ {0, 1e-3, 3e-3, 1e-2} × additive activation ε ∈ {0, 0.5}."""
    return [
        Setting(dim, batch, data=Quantizer("additive", d), act=Quantizer("additive", a))
        for d in (0.0, 1e-3, 3e-3, 1e-2)
        for a in (0.0, 0.5)
    ]


def contenders(
    problem: Problem, settings: list[Setting], seeds: list[int], n_steps: int, subset: int
) -> dict[str, tuple[Callable[[], None], int]]:
    """name -> (run once, number of simulated (setting, seed) steps it performs)."""
    pairs = [(s, seed) for s in settings for seed in seeds][:subset]

    def batched(dtype: torch.dtype) -> Callable[[], None]:
        return lambda: simulate(problem, settings, seeds, [n_steps], dtype=dtype)

    def one_at_a_time() -> None:
        for setting, seed in pairs:
            simulate(problem, [setting], [seed], [n_steps])

    def numpy_loop() -> None:
        for setting, seed in pairs:
            reference_sgd(problem, setting, [n_steps], numpy_draw(np.random.default_rng(seed)))

    full = len(settings) * len(seeds) * n_steps
    return {
        "batched torch float64": (batched(torch.float64), full),
        "batched torch float32": (batched(torch.float32), full),
        "torch, one pair at a time": (one_at_a_time, len(pairs) * n_steps),
        "numpy loop (peer)": (numpy_loop, len(pairs) * n_steps),
    }


def measure(runs: dict[str, tuple[Callable[[], None], int]], repeats: int) -> dict[str, dict[str, float]]:
    """Median wall seconds per contender over ``repeats`` interleaved repeats, and steps per second."""
    seconds: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(repeats):
        for name, (run, _) in runs.items():
            start = time.perf_counter()
            run()
            seconds[name].append(time.perf_counter() - start)
    out = {}
    for name, (_, steps) in runs.items():
        median = statistics.median(seconds[name])
        out[name] = {"simulated_steps": steps, "seconds": median, "steps_per_second": steps / median}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a small workload (a few seconds)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    problem = Problem()
    seeds = list(range(4 if args.quick else 20))
    n_steps = 256 if args.quick else 2048
    cases = [("Q1-like: d = 200, B = 1", 200, 1), ("batch: d = 100, B = 16", 100, 16)]
    report = {
        "benchmark": "quantsgd_simulator_speed",
        "machine": machine_info(),
        "threads": args.threads,
        "load_average": os.getloadavg(),
        "settings_per_batch": 8,
        "seeds": len(seeds),
        "n_steps": n_steps,
        "cases": {},
    }
    for title, dim, batch in cases:
        settings = workload(dim, batch)
        runs = contenders(problem, settings, seeds, n_steps, subset=4)
        results = measure(runs, args.repeats)
        peer = results["numpy loop (peer)"]["steps_per_second"]
        for value in results.values():
            value["speedup_vs_numpy"] = value["steps_per_second"] / peer
        report["cases"][title] = results
        print(f"\n{title} ({len(settings)} settings x {len(seeds)} seeds x {n_steps} steps)")
        for name, value in results.items():
            print(
                f"  {name:28s} {value['steps_per_second']:12.0f} steps/s"
                f"   x{value['speedup_vs_numpy']:.1f} vs numpy"
            )
    report["load_average_end"] = os.getloadavg()
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"quantsgd_simulator_speed{'_quick' if args.quick else ''}.json"
    path.write_text(json.dumps(report, indent=2) + "\n")
    print(f"\nwrote {path}")


if __name__ == "__main__":
    main()
