"""Step time of ``litlab-train`` against a hand-written PyTorch loop on the same model and data.

litlab side: the composed experiment (``experiment=kan/function_fit``, default callbacks: best and last
checkpoints, NaN guard, LR monitor; no validation, no test) run through ``litlab.train.train``, timed
from the first step after warm-up to the end of fit by a callback; once as a batch job runs it (no
progress bar, since stdout is no terminal) and once with the progress bar a terminal shows. Hand side:
the same seeded KAN and full-batch tensors, ``zero_grad; mse(model(x), y).backward(); step`` with
Adam. Time is the process's CPU time (less
sensitive than wall time to other jobs on a shared machine), one thread; the contenders take turns in
every repeat, and ratios are of the medians. Target: litlab / hand <= 1.05.

Run:  python benchmarks/trainer_overhead.py [--quick]
Writes benchmarks/results/trainer_overhead.json (``--quick``: trainer_overhead_quick.json).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

import lightning as L
import torch
from hydra import compose, initialize_config_module
from hydra.core.global_hydra import GlobalHydra
from hydra.core.hydra_config import HydraConfig
from hydra.utils import instantiate
from omegaconf import DictConfig, open_dict

from litlab.core.machine import cpu_model
from litlab.runner.resolvers import register_hydra_extensions
from litlab.train import train

register_hydra_extensions()

RESULTS = Path(__file__).resolve().parent / "results"
TARGET_RATIO = 1.05
VARIANTS = {
    # what a SLURM job, CI or a pipe gets: the default callbacks, no progress bar (stdout is no terminal)
    "batch_job": [],
    # what an interactive terminal gets: the same plus the rich progress bar redrawn every step
    "terminal_progress_bar": ["+trainer.enable_progress_bar=true"],
}
SIZES = {
    # the experiment's CPU default: [2, 8, 1], G = 5, 4000 training points, full batch
    "default": ["model.net.width=8", "model.net.depth=1", "model.net.grid_size=5"],
    # the paper's big model: [2, 32, 32, 32, 1], G = 20
    "paper": ["model.net.width=32", "model.net.depth=3", "model.net.grid_size=20"],
}


class StepClock(L.Callback):
    """ms per step from the first step after ``warmup`` epochs to the end of fit (before the final save).

    Instantiated by the Trainer config (``_target_: __main__.StepClock``); each run appends to ``records``.
    """

    records: list[float] = []

    def __init__(self, warmup: int) -> None:
        self.warmup = warmup
        self.start, self.first_step = 0.0, 0

    def on_train_epoch_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if trainer.current_epoch == self.warmup:
            self.start, self.first_step = time.process_time(), trainer.global_step

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        steps = trainer.global_step - self.first_step
        self.records.append(1000 * (time.process_time() - self.start) / steps)


def composed(size: list[str], epochs: int, output_dir: Path) -> DictConfig:
    GlobalHydra.instance().clear()
    overrides = [
        "experiment=kan/function_fit",
        *size,
        f"trainer.max_epochs={epochs}",
        f"trainer.check_val_every_n_epoch={epochs + 1}",
        "test=false",
        "optimized_metric=null",
        "callbacks.figures=null",
        "extras.print_config=false",
        "extras.torch_threads=1",
    ]
    with initialize_config_module(config_module="litlab.configs", version_base="1.3"):
        cfg = compose("train", overrides=overrides, return_hydra_config=True)
    with open_dict(cfg):
        cfg.hydra.runtime.output_dir = str(output_dir)
        cfg.hydra.job.num = 0
    HydraConfig.instance().set_config(cfg)
    with open_dict(cfg):
        cfg.paths.output_dir = str(output_dir)
        del cfg["hydra"]
    return cfg


def litlab_step_ms(size: list[str], epochs: int, warmup: int) -> float:
    """ms per step of one litlab run (a fresh run folder each time)."""
    with tempfile.TemporaryDirectory() as folder:
        cfg = composed(size, epochs, Path(folder))
        with open_dict(cfg):
            cfg.callbacks["step_clock"] = {"_target_": f"{__name__}.StepClock", "warmup": warmup}
        train(cfg)
    return StepClock.records[-1]


def hand_step_ms(size: list[str], epochs: int, warmup: int) -> float:
    """ms per step of the plain loop on the same seeded model and full-batch data."""
    with tempfile.TemporaryDirectory() as folder:
        cfg = composed(size, epochs, Path(folder))
    L.seed_everything(cfg.seed, verbose=False)
    data = instantiate(cfg.data)
    data.setup("fit")
    x, y = data.train_set.tensors
    model = instantiate(cfg.model.net)
    optimizer = torch.optim.Adam(model.parameters(), lr=cfg.model.optimizer.lr)

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        torch.nn.functional.mse_loss(model(x), y).backward()
        optimizer.step()

    for _ in range(warmup):
        step()
    start = time.process_time()
    for _ in range(epochs - warmup):
        step()
    return 1000 * (time.process_time() - start) / (epochs - warmup)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer steps and repeats")
    args = parser.parse_args()
    torch.set_num_threads(1)
    os.environ.setdefault("WANDB_MODE", "disabled")
    plan = (
        {"default": (300, 9), "paper": (40, 5)} if not args.quick else {"default": (100, 3), "paper": (15, 2)}
    )
    warmup = 5
    load_before = os.getloadavg()[0]
    rows = []
    for name, size in SIZES.items():
        epochs, repeats = plan[name]
        times: dict[str, list[float]] = {variant: [] for variant in [*VARIANTS, "hand"]}
        for _ in range(repeats):
            for variant, extra in VARIANTS.items():
                times[variant].append(litlab_step_ms([*size, *extra], epochs, warmup))
            times["hand"].append(hand_step_ms(size, epochs, warmup))
        medians = {variant: statistics.median(values) for variant, values in times.items()}
        ratios = {variant: medians[variant] / medians["hand"] for variant in VARIANTS}
        rows.append(
            {
                "size": name,
                "overrides": size,
                "steps_timed": epochs - warmup,
                "repeats": repeats,
                "cpu_ms_per_step_median": medians,
                "cpu_ms_per_step_min": {variant: min(values) for variant, values in times.items()},
                "ratio_to_hand": ratios,
                "meets_target": {variant: ratio <= TARGET_RATIO for variant, ratio in ratios.items()},
            }
        )
        summary = "  ".join(f"{variant} {ratio:.3f}x" for variant, ratio in ratios.items())
        print(
            f"{name:8s} hand {medians['hand']:8.3f} ms/step  {summary}  (target <= {TARGET_RATIO})",
            flush=True,
        )
    payload = {
        "benchmark": "trainer_overhead",
        "quick": args.quick,
        "torch_version": torch.__version__,
        "lightning_version": L.__version__,
        "threads": 1,
        "clock": "process CPU time",
        "variants": VARIANTS,
        "cpu_model": cpu_model(),
        "cpu_count": os.cpu_count(),
        "load_average_before_after": [load_before, os.getloadavg()[0]],
        "target_ratio": TARGET_RATIO,
        "sizes": rows,
    }
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / f"trainer_overhead{'_quick' if args.quick else ''}.json"
    out.write_text(json.dumps(payload, indent=2) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
