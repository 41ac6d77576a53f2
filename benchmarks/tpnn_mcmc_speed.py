"""Bayesian-TPNN speed: MCMC iterations per second against n and p, beside its peers in one run.

Peers: ANOVA-T^2PNN's full-batch gradient epochs per second at the same (n, p) (its epoch is the
fixed-order model's unit of work, as an iteration is the sampler's), and EBM's fit time where
``interpret`` is installed. The chain is warmed up (K grows to its working size) before timing.
Both wall and process CPU seconds are recorded, with the load average (the machine is shared).

    python benchmarks/tpnn_mcmc_speed.py [--quick | --smoke]

Writes benchmarks/results/tpnn_mcmc_speed[_quick|_smoke].json (``--smoke``: n = 100, a few iterations).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from importlib.util import find_spec
from pathlib import Path

import torch
from _smoke import SMOKE_HELP, suffix

from litlab.core.machine import machine_info
from litlab.datamodules.tabular import load_tabular
from litlab.methods.tpnn.anova import ANOVATPNN
from litlab.methods.tpnn.baselines import fit_ebm
from litlab.methods.tpnn.estimator import BayesianTPNN, TPNNConfig

RESULTS = Path(__file__).parent / "results"


def timed(fn) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - wall, time.process_time() - cpu


def chain_speed(n: int, p: int, warmup: int, iterations: int) -> dict[str, float]:
    """Iterations per second of the sampler after ``warmup`` iterations on planted3 data."""
    splits = load_tabular("planted3", n_samples=int(n / 0.6) + 2, n_features=p, seed=0)
    x, y = splits.x_train[:n], splits.y_train[:n]
    warm = BayesianTPNN(TPNNConfig(n_iter=warmup + iterations, burn_in=warmup, thin=iterations), seed=0)
    stamps: list[tuple[float, float]] = []

    def mark(t: int) -> None:
        if t in (warmup - 1, warmup + iterations - 1):
            stamps.append((time.perf_counter(), time.process_time()))

    warm.fit(x, y, callback=mark)
    (w0, c0), (w1, c1) = stamps
    nodes = sum(warm.trace.n_nodes[warmup:]) / iterations
    return {
        "iters_per_s": iterations / (w1 - w0),
        "iters_per_cpu_s": iterations / (c1 - c0),
        "mean_nodes": nodes,
    }


def anova_speed(n: int, p: int, epochs: int) -> dict[str, float]:
    """Full-batch Adam epochs per second of ANOVA-T^2PNN (10 TPNNs per component)."""
    torch.manual_seed(0)
    x, y = torch.rand(n, p), torch.randn(n)
    net = ANOVATPNN(p, order=2, n_basis=10)
    optimizer = torch.optim.Adam(net.parameters(), lr=1e-2)

    def run() -> None:
        for _ in range(epochs):
            optimizer.zero_grad()
            torch.nn.functional.mse_loss(net(x), y).backward()
            optimizer.step()

    run()  # warm-up
    wall, cpu = timed(run)
    return {"epochs_per_s": epochs / wall, "epochs_per_cpu_s": epochs / cpu, "nodes": len(net.vars)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="two sizes only")
    parser.add_argument("--smoke", action="store_true", help=SMOKE_HELP)
    args = parser.parse_args()
    torch.set_num_threads(1)
    sizes = [(250, 10), (1000, 10), (2000, 10), (1000, 20), (1000, 50)]
    sizes = [(100, 10)] if args.smoke else sizes[:2] if args.quick else sizes
    warmup, iterations, ebm_samples = (10, 5, 200) if args.smoke else (100, 50, 1000)
    ebm_settings = {"interactions": 0, "outer_bags": 1} if args.smoke else {}
    rows = []
    for n, p in sizes:
        row = {"n": n, "p": p, **chain_speed(n, p, warmup=warmup, iterations=iterations)}
        epochs = 2 if args.smoke else 3 if p > 20 else 10
        row.update({f"anova2_{k}": v for k, v in anova_speed(n, p, epochs=epochs).items()})
        rows.append(row)
        print(row, flush=True)
    ebm = None
    if find_spec("interpret") is not None:
        splits = load_tabular("planted3", n_samples=ebm_samples, n_features=10, seed=0)
        ebm = {
            "n": len(splits.y_train),
            "p": 10,
            "fit_s": fit_ebm(splits.x_train, splits.y_train, splits.x_test, **ebm_settings).seconds,
        }
        print("ebm", ebm)
    payload = {
        "benchmark": "tpnn_mcmc_speed",
        "machine": machine_info(),
        "load_average": os.getloadavg(),
        "threads": 1,
        "rows": rows,
        "ebm": ebm,
    }
    path = RESULTS / f"tpnn_mcmc_speed{suffix(args)}.json"
    RESULTS.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, indent=2) + "\n")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
