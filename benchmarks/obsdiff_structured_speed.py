"""CPU wall clock, parameters and FLOPs of pruned DiTs against the dense one: structured OBS with FFN neurons
and/or attention heads physically removed, and a 2:4-masked model (dense kernels: no FLOPs or time saved).

Models are the task's architecture (4 blocks, 4 heads of 16, FFN 256) with random non-identity weights
(speed does not depend on what the weights learned), pruned with 16 calibration labels x 20 DDIM steps
(CFG 2). Each time is the median of ``--repeats`` guided ε̂ calls on 64 images at one thread, the models
timed in turn within each repeat so that load changes hit them alike. FLOPs: torch's FLOP counter on one
guided ε̂ call on one image.

Run:  python benchmarks/obsdiff_structured_speed.py [--smoke]
Writes benchmarks/results/obsdiff_structured_speed[_smoke].json (``--smoke``: 2 labels x 2 steps, 1 repeat).
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
from litlab.methods.obsdiff.dit import build_dit, eps_flops, predict_eps
from litlab.methods.obsdiff.pipeline import calibrator
from litlab.methods.obsdiff.prune import PruneSpec, prune_model

RESULTS = Path(__file__).resolve().parent / "results"
STEPS, GUIDANCE, BATCH = 20, 2.0, 64
VARIANTS = {
    "obs_structured_30pct_ffn": PruneSpec("obs_structured", 0.3, structure="ffn"),
    "obs_structured_1of4_heads": PruneSpec("obs_structured", 0.25, structure="heads"),
    "obs_structured_2of4_heads": PruneSpec("obs_structured", 0.5, structure="heads"),
    "obs_structured_25pct_both": PruneSpec("obs_structured", 0.25, structure="both"),
    "obs_2of4_masked": PruneSpec("obs", 0.0, n=2, m=4),
}


def random_dit() -> torch.nn.Module:
    """The task's DiT with random (non-identity) block weights."""
    torch.manual_seed(0)
    model = build_dit()
    for p in model.parameters():
        p.data.normal_(0, 0.05)
    return model.eval()


def forward_ms(models: dict[str, torch.nn.Module], repeats: int) -> dict[str, float]:
    """Median milliseconds of one guided ε̂ call on ``BATCH`` images per model, interleaved."""
    x, labels = torch.randn(BATCH, 3, 16, 16), torch.arange(BATCH) % 8
    times: dict[str, list[float]] = {name: [] for name in models}
    with torch.no_grad():
        for _ in range(repeats):
            for name, model in models.items():
                start = time.perf_counter()
                predict_eps(model, x, torch.tensor(500), labels, GUIDANCE, 8)
                times[name].append(1e3 * (time.perf_counter() - start))
    return {name: statistics.median(values) for name, values in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--smoke", action="store_true", help=SMOKE_HELP)
    args = parser.parse_args()
    torch.set_num_threads(1)
    labels, steps = (2, 2) if args.smoke else (16, STEPS)
    args.repeats = 1 if args.smoke else args.repeats
    models = {"dense": random_dit()}
    for name, spec in VARIANTS.items():
        models[name] = copy.deepcopy(models["dense"])
        prune_model(models[name], calibrator(models[name], labels, 0, steps, GUIDANCE), steps, spec)
    milliseconds = forward_ms(models, args.repeats)
    rows = {}
    for name, model in models.items():
        rows[name] = {
            "forward_ms": milliseconds[name],
            "parameters": sum(p.numel() for p in model.parameters()),
            "flops_per_eps": eps_flops(model, 16, GUIDANCE),
        }
        rows[name]["speedup"] = milliseconds["dense"] / milliseconds[name]
        rows[name]["flops_ratio"] = rows[name]["flops_per_eps"] / rows["dense"]["flops_per_eps"]
    out = {"machine": machine_info(), "threads": 1, "batch": BATCH, "repeats": args.repeats, "models": rows}
    path = RESULTS / f"obsdiff_structured_speed{suffix(args)}.json"
    RESULTS.mkdir(exist_ok=True)
    path.write_text(json.dumps(out, indent=2))
    print(json.dumps(rows, indent=2), f"\nwrote {path}")


if __name__ == "__main__":
    main()
