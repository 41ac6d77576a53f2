"""DeepWeightFlow speed: zoo training throughput (networks per minute) and the time to generate 100
networks with the flow (RK4 on 100 points, Euler on 10/20/100) against a 1000-step DDPM on the same
backbone, zoo and training length. Each timed sampler's mean accuracy is recorded so that speed is
compared at equal quality. Targets: 100 networks in ≤ 5 s; DDPM time / flow time ≥ 10 at equal accuracy.
Accuracy claims (ablations, baselines, seeds) live in results/deepweightflow/study/, not here.

Run:  python benchmarks/deepweightflow_generation.py [--steps 3000] [--threads 1] [--smoke]
Writes benchmarks/results/deepweightflow_generation[_smoke].json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

import torch
from _smoke import SMOKE_HELP, suffix

from litlab.core.machine import machine_info
from litlab.methods.deepweightflow.canonical import align_zoo
from litlab.methods.deepweightflow.module import WeightGenerator
from litlab.methods.deepweightflow.training import fit_generator, timed_generation
from litlab.methods.deepweightflow.zoo import train_zoo

RESULTS = Path(__file__).resolve().parent / "results"
MLP = {"name": "mlp", "sizes": [64, 32, 10]}
EQUAL_ACCURACY = 0.005  # a flow sampler counts as "equal quality" within half a point of the DDPM's mean


def zoo_throughput(smoke: bool) -> list[dict]:
    """Networks per minute of the vmapped zoo trainer for each architecture (digits); two networks for
    one epoch each under ``smoke``."""
    rows = []
    for arch, n, epochs, batch, lr in (
        (MLP, 200, 20, 128, 1e-2),
        ({"name": "cnn", "channels": 8}, 40, 8, 64, 1e-2),
        ({"name": "vit", "dim": 32, "depth": 2, "heads": 2}, 20, 4, 64, 3e-3),
    ):
        n, epochs = (2, 1) if smoke else (n, epochs)
        start = time.perf_counter()
        zoo = train_zoo(arch, "digits", n, epochs, batch, lr)
        seconds = time.perf_counter() - start
        rows.append(
            dict(arch=arch, networks=n, epochs=epochs, seconds=seconds, networks_per_minute=60 * n / seconds,
                 acc_mean=float(zoo.accuracy.mean()))
        )  # fmt: skip
        print(rows[-1], flush=True)
    return rows


def timed_row(name: str, module: WeightGenerator, n: int, repeats: int) -> dict:
    """Median seconds over ``repeats`` generations of ``n`` networks (after a warm-up) and their accuracy."""
    module.generate(2)
    timings = [timed_generation(module, n) for _ in range(repeats)]
    accuracy = timings[0][1]
    row = dict(sampler=name, seconds=statistics.median(t for t, _ in timings), repeats=repeats,
               acc_mean=float(accuracy.mean()), acc_min=float(accuracy.min()))  # fmt: skip
    print(row, flush=True)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=3000)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--n", type=int, default=100)
    parser.add_argument("--smoke", action="store_true", help=SMOKE_HELP)
    args = parser.parse_args()
    if args.smoke:
        args.steps, args.n = 5, 4
    zoo_size, zoo_epochs, n_train = (8, 1, 4) if args.smoke else (200, 20, 100)
    torch.set_num_threads(args.threads)
    load_before = os.getloadavg()[0]
    throughput = zoo_throughput(args.smoke)
    zoo = align_zoo(train_zoo(MLP, "digits", zoo_size, zoo_epochs, 128, 1e-2))
    generators: dict[str, WeightGenerator] = {}
    fit_seconds = {}
    for kind in ("flow", "ddpm"):
        start = time.perf_counter()
        generators[kind] = fit_generator(kind, zoo, n_train, args.steps)
        fit_seconds[kind] = time.perf_counter() - start
    flow, ddpm = generators["flow"], generators["ddpm"]
    rows = []
    for solver, points in (("rk4", 100), ("euler", 100), ("euler", 20), ("euler", 10)):
        flow.hparams.solver, flow.hparams.steps = solver, points
        rows.append(timed_row(f"flow {solver}-{points}", flow, args.n, repeats=3))
    ddpm_row = timed_row("ddpm ancestral-1000", ddpm, args.n, repeats=1)
    rk4 = rows[0]
    equal = [r for r in rows if r["acc_mean"] >= ddpm_row["acc_mean"] - EQUAL_ACCURACY]
    fastest_equal = min(equal, key=lambda r: r["seconds"]) if equal else None
    equal_ratio = ddpm_row["seconds"] / fastest_equal["seconds"] if fastest_equal else None
    result = {
        "benchmark": "DeepWeightFlow generation speed against a 1000-step DDPM, and zoo throughput",
        "settings": {"threads": args.threads, "train_steps": args.steps, "networks": args.n, "hidden": 256,
                     "zoo": f"{zoo_size} MLPs 64-32-10 on digits, re-based, first {n_train} train",
                     "equal_accuracy_tolerance": EQUAL_ACCURACY},  # fmt: skip
        "machine": machine_info(),
        "load_average": {"before": load_before, "after": os.getloadavg()[0]},
        "fit_seconds": fit_seconds,
        "flow_rk4_100_seconds": rk4["seconds"],
        "flow_rk4_100_within_5s": rk4["seconds"] <= 5.0,
        "ddpm_over_flow_rk4_100": ddpm_row["seconds"] / rk4["seconds"],
        "fastest_flow_at_equal_accuracy": fastest_equal["sampler"] if fastest_equal else None,
        "ddpm_over_flow_at_equal_accuracy": equal_ratio,
        "target_10x_met": equal_ratio is not None and equal_ratio >= 10,
        "samplers": [*rows, ddpm_row],
        "zoo_throughput": throughput,
    }  # fmt: skip
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"deepweightflow_generation{suffix(args)}.json").write_text(json.dumps(result, indent=1))
    print(json.dumps({k: v for k, v in result.items() if k not in ("samplers", "zoo_throughput")}, indent=1))


if __name__ == "__main__":
    main()
