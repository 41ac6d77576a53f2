"""Planning latency per replanning step of each BridgeDrive study planner on a CPU.

One call = encode one observation and produce one plan (batch 1, as in closed loop), for 1, 2, 5, 10 and
20 denoising steps (one-shot planners ignore the count). Planners are untrained (latency does not depend
on the weights); the contenders run in turn within every repeat so load changes hit all alike; the median
over repeats is reported in milliseconds (wall clock, and the thread's CPU time, which a busy machine's
preemption does not inflate), next to the parameter count.

Run:  python benchmarks/bridgedrive_latency.py [--repeats 50] [--threads 1]
Writes benchmarks/results/bridgedrive_latency.json and prints a table.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from pathlib import Path

import torch

from litlab.core.machine import cpu_model
from litlab.datamodules.driving_sim import observation_dim
from litlab.methods.bridgedrive import planners as P
from litlab.methods.bridgedrive.anchors import plan_statistics

RESULTS = Path(__file__).resolve().parent / "results"
ARMS = {
    "bridge": P.BridgePlanner,
    "truncated": P.TruncatedDiffusionPlanner,
    "plain": P.PlainDiffusionPlanner,
    "classifier": P.AnchorClassifierPlanner,
    "regression": P.RegressionPlanner,
}
STEPS = (1, 2, 5, 10, 20)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=50)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    plans = torch.randn(512, 8, 2) + torch.linspace(5, 80, 8)[:, None] * torch.tensor([1.0, 0.0])
    stats = plan_statistics(plans, 16, seed=0)
    obs = torch.randn(1, observation_dim(8))
    planners = {name: arm(obs_dim=obs.shape[1], **stats).eval() for name, arm in ARMS.items()}
    times: dict[str, dict[int, list[float]]] = {name: {s: [] for s in STEPS} for name in ARMS}
    cpu: dict[str, dict[int, list[float]]] = {name: {s: [] for s in STEPS} for name in ARMS}
    for _ in range(3):  # warm-up
        for planner in planners.values():
            planner.plan(obs, 2)
    for _ in range(args.repeats):
        for steps in STEPS:
            for name, planner in planners.items():
                start, start_cpu = time.perf_counter(), time.thread_time()
                planner.plan(obs, steps)
                times[name][steps].append(1000 * (time.perf_counter() - start))
                cpu[name][steps].append(1000 * (time.thread_time() - start_cpu))
    results = {
        "machine": {"cpu": cpu_model(), "platform": platform.platform(), "threads": args.threads},
        "torch": torch.__version__,
        "repeats": args.repeats,
        "latency_ms": {n: {str(s): statistics.median(v) for s, v in d.items()} for n, d in times.items()},
        "cpu_ms": {n: {str(s): statistics.median(v) for s, v in d.items()} for n, d in cpu.items()},
        "parameters": {n: sum(p.numel() for p in pl.parameters()) for n, pl in planners.items()},
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "bridgedrive_latency.json").write_text(json.dumps(results, indent=2))
    print(f"{'planner':<11} {'params':>8} " + " ".join(f"{s:>3} step ms" for s in STEPS) + "  (wall / CPU)")
    for name in ARMS:
        row = " ".join(
            f"{results['latency_ms'][name][str(s)]:>5.2f}/{results['cpu_ms'][name][str(s)]:<5.2f}"
            for s in STEPS
        )
        print(f"{name:<11} {results['parameters'][name]:>8} {row}")


if __name__ == "__main__":
    main()
