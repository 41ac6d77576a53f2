"""DeepWeightFlow speed: zoo training throughput (networks per minute), time to generate 100 networks
(RK4 on 100 points, Euler on 10/20/100) against a 1000-step DDPM on the same backbone, with the accuracy
each reaches, and re-based vs raw flow accuracy. Targets: generation ≤ 5 s; DDPM/flow time ≥ 10×.

Run:  python benchmarks/deepweightflow_generation.py [--steps 2000] [--threads 1]
Writes benchmarks/results/deepweightflow_generation.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import torch

from litlab.core.machine import machine_info
from litlab.methods.deepweightflow.canonical import align_zoo
from litlab.methods.deepweightflow.study import fit_generator, timed_generation
from litlab.methods.deepweightflow.zoo import train_zoo

RESULTS = Path(__file__).resolve().parent / "results"
MLP = {"name": "mlp", "sizes": [64, 32, 10]}


def zoo_throughput() -> list[dict]:
    """Networks per minute of the vmapped zoo trainer for each architecture (digits)."""
    rows = []
    for arch, n, epochs, batch, lr in (
        (MLP, 200, 20, 128, 1e-2),
        ({"name": "cnn", "channels": 8}, 40, 8, 64, 1e-2),
        ({"name": "vit", "dim": 32, "depth": 2, "heads": 2}, 20, 4, 64, 3e-3),
    ):
        start = time.perf_counter()
        zoo = train_zoo(arch, "digits", n, epochs, batch, lr)
        seconds = time.perf_counter() - start
        rows.append(
            dict(arch=arch, networks=n, epochs=epochs, seconds=seconds, networks_per_minute=60 * n / seconds,
                 acc_mean=float(zoo.accuracy.mean()), acc_std=float(zoo.accuracy.std()))
        )  # fmt: skip
        print(rows[-1])
    return rows


def median_generation(module, n: int, repeats: int = 3) -> tuple[float, torch.Tensor]:
    """Median seconds over ``repeats`` timed generations (after one untimed warm-up) and the accuracies."""
    module.generate(2)
    timings = [timed_generation(module, n) for _ in range(repeats)]
    return statistics.median(t for t, _ in timings), timings[0][1]


def row(
    model: str, canonical: bool, solver: str, points: int, seconds: float, accuracy: torch.Tensor
) -> dict:
    """One result row: sampling time and the sampled networks' accuracy (mean, std, min)."""
    stats = dict(
        acc_mean=float(accuracy.mean()), acc_std=float(accuracy.std()), acc_min=float(accuracy.min())
    )
    out = dict(model=model, canonical=canonical, solver=solver, points=points, seconds=seconds, **stats)
    print(out)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--n", type=int, default=100)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    throughput = zoo_throughput()
    zoo = train_zoo(MLP, "digits", 200, 20, 128, 1e-2)
    aligned = align_zoo(zoo)
    rows = []
    flow = fit_generator("flow", aligned, 100, args.steps)
    for solver, steps in (("rk4", 100), ("euler", 100), ("euler", 20), ("euler", 10)):
        flow.hparams.solver, flow.hparams.steps = solver, steps
        seconds, accuracy = median_generation(flow, args.n)
        rows.append(row("flow", True, solver, steps, seconds, accuracy))
    raw = fit_generator("flow", zoo, 100, args.steps)
    seconds, accuracy = median_generation(raw, args.n)
    rows.append(row("flow", False, "rk4", 100, seconds, accuracy))
    ddpm = fit_generator("ddpm", aligned, 100, args.steps)
    seconds, accuracy = median_generation(ddpm, args.n, repeats=1)
    rows.append(row("ddpm", True, "ancestral", 1000, seconds, accuracy))
    flow_rk4 = rows[0]
    result = {
        "benchmark": "DeepWeightFlow generation speed and zoo throughput",
        "settings": {
            "threads": args.threads,
            "train_steps": args.steps,
            "networks": args.n,
            "hidden": 256,
            "zoo": "200 MLPs 64-32-10 on digits, first 100 train",
        },  # fmt: skip
        "machine": machine_info(),
        "zoo_acc_mean": float(zoo.accuracy[:100].mean()),
        "generation_seconds_rk4": flow_rk4["seconds"],
        "within_5s": flow_rk4["seconds"] <= 5.0,
        "ddpm_over_flow_time": rows[-1]["seconds"] / flow_rk4["seconds"],
        "ddpm_over_flow_at_least_10x": rows[-1]["seconds"] / flow_rk4["seconds"] >= 10,
        "zoo_throughput": throughput,
        "rows": rows,
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "deepweightflow_generation.json").write_text(json.dumps(result, indent=1))
    print(json.dumps({k: v for k, v in result.items() if k not in ("rows", "zoo_throughput")}, indent=1))


if __name__ == "__main__":
    main()
