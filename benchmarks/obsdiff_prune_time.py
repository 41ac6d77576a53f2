"""OBS-Diff's pruning time against its peers (Wanda, magnitude) vs calibration samples and model size (the
speed and FLOPs of the pruned models: ``benchmarks/obsdiff_structured_speed.py``).

Pruning time is what ``prune_model`` spends: K=4 calibration sampling passes with forward hooks (20 DDIM
steps, CFG 2) plus the solver; magnitude needs no calibration. Models are untrained DiTs with random
weights of the task's architecture (time does not depend on what the weights learned). Each timing is the
median of ``--repeats`` runs at one thread.

Run:  python benchmarks/obsdiff_prune_time.py [--quick | --smoke]
Writes benchmarks/results/obsdiff_prune_time.json (``--quick``: obsdiff_prune_time_quick.json; ``--smoke``:
one layer, 2 labels x 2 steps, obsdiff_prune_time_smoke.json).
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import time
from pathlib import Path

import torch
from _smoke import SMOKE_HELP, suffix

from litlab.core.machine import machine_info
from litlab.methods.obsdiff.dit import build_dit
from litlab.methods.obsdiff.pipeline import calibrator
from litlab.methods.obsdiff.prune import PruneSpec, prune_model

RESULTS = Path(__file__).resolve().parent / "results"
STEPS, GUIDANCE = 20, 2.0


def random_dit(num_layers: int) -> torch.nn.Module:
    """A DiT of the task's width with random (non-identity) block weights."""
    torch.manual_seed(0)
    model = build_dit(num_layers=num_layers)
    for p in model.parameters():
        p.data.normal_(0, 0.05)
    return model.eval()


def prune_seconds(
    model: torch.nn.Module, method: str, n_calibration: int, repeats: int, steps: int = STEPS
) -> float:
    """Median seconds of one 50 % prune of a copy of ``model`` (``steps`` DDIM steps per calibration)."""
    times = []
    for _ in range(repeats):
        copied = copy.deepcopy(model)
        calibrate = calibrator(copied, n_calibration, 0, steps, GUIDANCE)
        start = time.perf_counter()
        prune_model(copied, calibrate, steps, PruneSpec(method=method, sparsity=0.5, groups=4))
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer sizes and repeats")
    parser.add_argument("--smoke", action="store_true", help=SMOKE_HELP)
    args = parser.parse_args()
    torch.set_num_threads(1)
    small = args.quick or args.smoke
    repeats = 1 if small else 3
    calibrations = [2] if args.smoke else [8, 16] if args.quick else [8, 16, 32, 64]
    layers = [1] if args.smoke else [2] if args.quick else [2, 4, 8]
    steps = 2 if args.smoke else STEPS
    rows = []
    for num_layers in layers:
        model = random_dit(num_layers)
        for n in calibrations if num_layers == 4 or small else [32]:
            for method in ("obs", "wanda", "magnitude"):
                seconds = prune_seconds(model, method, n, repeats, steps)
                rows.append(
                    {"num_layers": num_layers, "n_calibration": n, "method": method, "seconds": seconds}
                )
                print(rows[-1], flush=True)
    out = {
        "machine": machine_info(),
        "threads": 1,
        "steps": steps,
        "guidance": GUIDANCE,
        "prune": rows,
    }
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"obsdiff_prune_time{suffix(args)}.json"
    path.write_text(json.dumps(out, indent=2))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
