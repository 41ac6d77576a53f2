"""How far class accuracy and class agreement separate OBS-Diff from Wanda and magnitude, and how that
gap moves across independently trained DiTs: the evidence behind the claim test's class assertions.

One run judges the DiT and classifier of the current cache (``$LITLAB_CACHE``; a cold cache trains a new
pair, about 5 min of CPU) on the claim test's calibration seeds and settings, with many evaluation
samples so one sample is a small step. Run it once per cache folder (clear or point ``LITLAB_CACHE``
elsewhere between runs to get an independently retrained model); each run adds an entry under ``--tag``.

Run:  LITLAB_CACHE=/tmp/obsdiff_b python benchmarks/obsdiff_class_spread.py --tag model_b
Writes benchmarks/results/obsdiff_class_spread.json (``--smoke``: a one-block DiT trained for 5 steps, one
seed and sparsity, 2 DDIM steps, obsdiff_class_spread_smoke.json).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import torch
from _smoke import SMOKE_HELP, suffix

from litlab.core.machine import machine_info
from litlab.methods.obsdiff.study import run_arms
from litlab.task import TaskContext

RESULTS = Path(__file__).resolve().parent / "results"
SMOKE_DIT = {"train_steps": 5, "num_layers": 1}
ARMS = {
    "obs_diff": {"method": "obs", "timestep_weighting": "log_decrease", "groups": 4},
    "wanda": {"method": "wanda", "groups": 4},
    "magnitude": {"method": "magnitude"},
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tag", required=True, help="name of this trained model in the JSON")
    parser.add_argument("--seeds", type=int, nargs="+", default=[10, 11, 12])
    parser.add_argument("--sparsities", type=float, nargs="+", default=[0.5, 0.6])
    parser.add_argument("--n-calibration", type=int, default=8)
    parser.add_argument("--eval-samples", type=int, default=256)
    parser.add_argument("--smoke", action="store_true", help=SMOKE_HELP)
    args = parser.parse_args()
    if args.smoke:
        args.seeds, args.sparsities, args.n_calibration, args.eval_samples = [10], [0.5], 2, 8
    torch.set_num_threads(1)
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as folder:
        runs, extra = run_arms(
            TaskContext.local(folder),
            ARMS,
            args.seeds,
            args.sparsities,
            n_calibration=args.n_calibration,
            steps=2 if args.smoke else 20,
            guidance=2.0,
            eval_samples=args.eval_samples,
            dit=SMOKE_DIT if args.smoke else None,
        )
    columns = ["sparsity", "arm", "seed", "image_mse", "class_acc", "class_agree"]
    entry = {
        "seconds": time.perf_counter() - start,
        "settings": vars(args),
        "dense": {k: extra["dense_metrics"][k] for k in ("class_acc", "class_agree")},
        "runs": runs[columns].to_dict("records"),
    }
    path = RESULTS / f"obsdiff_class_spread{suffix(args)}.json"
    stored = json.loads(path.read_text()) if path.exists() else {"machine": machine_info(), "models": {}}
    stored["models"][args.tag] = entry
    RESULTS.mkdir(exist_ok=True)
    path.write_text(json.dumps(stored, indent=2))
    print(runs.groupby(["sparsity", "arm"])[["image_mse", "class_acc", "class_agree"]].mean())
    print(f"dense {entry['dense']}; {entry['seconds']:.0f} s; wrote {path}")


if __name__ == "__main__":
    main()
