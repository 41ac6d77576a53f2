"""Step time of ``litlab-train`` against a hand-written PyTorch loop on the same model and data.

litlab side: the composed experiment (``experiment=kan/function_fit``, default callbacks: best and last
checkpoints, divergence guard, LR monitor; no validation, no test) run through ``litlab.train.train``,
timed from the first step after warm-up to the end of fit by a callback; once as a batch job runs it (no
progress bar, since stdout is no terminal) and once with the progress bar a terminal shows. Hand side:
the same seeded KAN and the same batches, ``zero_grad; mse(model(x), y).backward(); step`` with Adam.
Two data regimes: full batch (the experiment's default; ``data.steps_per_epoch`` full-batch steps per
epoch) and mini-batch (``data.batch_size`` < the training set, shuffled per epoch through the
DataModule's own loader). Lightning's floor: the same LightningModule and DataModule fitted by a bare
``L.Trainer`` (no callbacks, loggers, checkpointing, summary or bar), so litlab / bare is litlab's own cost
and bare / hand Lightning's loop. litlab's hook-dispatch patches (``litlab.runner.hook_calls``) are
process-wide, so the bare Trainer runs with them too once litlab has run. Time is the process's CPU time
(other jobs on a shared machine hardly move it), one thread; contenders take turns in every repeat; ratios
are of the medians. ``--device cuda`` times the same on a GPU with wall-clock time and synchronisation (a
smaller plan without the terminal variant, meant to finish in under a minute on an H200); ``--device auto``
picks cuda when it is available. Targets: litlab / hand <= 1.10 at the default size, <= 1.03 at the paper's.

Run:  python benchmarks/trainer_overhead.py [--quick | --smoke] [--device cpu|cuda|auto]
Writes benchmarks/results/trainer_overhead[_quick|_cuda|_smoke].json.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import lightning as L
import torch
from _smoke import SMOKE_HELP, suffix
from hydra import compose, initialize_config_module
from hydra.core.global_hydra import GlobalHydra
from hydra.core.hydra_config import HydraConfig
from hydra.utils import instantiate
from omegaconf import DictConfig, open_dict

from litlab.core.machine import cpu_model, skip_gpu_probe_on_cpu_machines
from litlab.runner import experiment
from litlab.runner.resolvers import register_hydra_extensions
from litlab.train import train

register_hydra_extensions()

RESULTS = Path(__file__).resolve().parent / "results"
TARGETS = {"default": 1.10, "paper": 1.03}
VARIANTS = {
    # what a SLURM job, CI or a pipe gets: the default callbacks, no progress bar (stdout is no terminal)
    "batch_job": [],
    # what an interactive terminal gets: the same plus the rich progress bar redrawn every step
    "terminal_progress_bar": ["+trainer.enable_progress_bar=true"],
}
SIZES = {
    # the experiment's CPU default: [2, 8, 1], G = 5, 4000 training points
    "default": ["model.net.width=8", "model.net.depth=1", "model.net.grid_size=5"],
    # the paper's big model: [2, 32, 32, 32, 1], G = 20
    "paper": ["model.net.width=32", "model.net.depth=3", "model.net.grid_size=20"],
}
MODES = {
    # full batch, 50 identical full-batch steps per epoch (what the experiment does)
    "full_batch": ["data.steps_per_epoch=50"],
    # mini-batches of 400 of the 4000 training points, shuffled per epoch (10 steps per epoch)
    "mini_batch": ["data.batch_size=400", "data.steps_per_epoch=1"],
}


class StepClock(L.Callback):
    """ms per step from the first step after ``warmup`` steps to the end of fit (before the final save)."""

    records: list[float] = []

    def __init__(self, warmup: int, cuda: bool = False) -> None:
        self.warmup, self.cuda = warmup, cuda
        self.start, self.first_step = 0.0, 0

    def _now(self) -> float:
        if self.cuda:
            torch.cuda.synchronize()
            return time.perf_counter()
        return time.process_time()

    def on_train_batch_start(
        self, trainer: L.Trainer, pl_module: L.LightningModule, batch, batch_idx
    ) -> None:
        if trainer.global_step == self.warmup:
            self.start, self.first_step = self._now(), trainer.global_step

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        steps = trainer.global_step - self.first_step
        self.records.append(1000 * (self._now() - self.start) / steps)


def composed(overrides: list[str], steps: int, output_dir: Path) -> DictConfig:
    GlobalHydra.instance().clear()
    overrides = [
        "experiment=kan/function_fit",
        *overrides,
        f"trainer.max_steps={steps}",
        "trainer.max_epochs=-1",
        "trainer.check_val_every_n_epoch=100000",
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


def litlab_step_ms(overrides: list[str], steps: int, warmup: int, cuda: bool) -> float:
    """ms per step of one litlab run (a fresh run folder each time)."""
    with tempfile.TemporaryDirectory() as folder:
        cfg = composed(overrides, steps, Path(folder))
        with open_dict(cfg):
            cfg.callbacks["step_clock"] = {
                "_target_": f"{__name__}.StepClock",
                "warmup": warmup,
                "cuda": cuda,
            }
        train(cfg)
    return StepClock.records[-1]


def bare_lightning_step_ms(overrides: list[str], steps: int, warmup: int, cuda: bool) -> float:
    """ms per step of a bare Lightning Trainer fitting the same LightningModule and DataModule."""
    with tempfile.TemporaryDirectory() as folder:
        cfg = composed(overrides, steps, Path(folder))
        L.seed_everything(cfg.seed, workers=True, verbose=False)
        datamodule, model = experiment.build_data_and_model(cfg)
        trainer = L.Trainer(
            accelerator="gpu" if cuda else "cpu",
            devices=1,
            precision=cfg.trainer.precision,
            max_steps=steps,
            max_epochs=-1,
            check_val_every_n_epoch=cfg.trainer.check_val_every_n_epoch,
            callbacks=[StepClock(warmup, cuda)],
            logger=False,
            enable_checkpointing=False,
            enable_progress_bar=False,
            enable_model_summary=False,
            default_root_dir=folder,
        )
        trainer.fit(model, datamodule=datamodule)
    return StepClock.records[-1]


def hand_step_ms(overrides: list[str], steps: int, warmup: int, cuda: bool) -> float:
    """ms per step of the plain loop on the same seeded model, iterating the DataModule's own loader."""
    with tempfile.TemporaryDirectory() as folder:
        cfg = composed(overrides, steps, Path(folder))
    L.seed_everything(cfg.seed, verbose=False)
    data = instantiate(cfg.data)
    data.setup("fit")
    device = torch.device("cuda" if cuda else "cpu")
    loader = data.train_dataloader()
    model = instantiate(cfg.model.net)(**data.data_spec()).to(device)  # as Regressor.bind_data builds it
    optimizer = torch.optim.Adam(model.parameters(), lr=cfg.model.optimizer.lr)

    def now() -> float:
        if cuda:
            torch.cuda.synchronize()
            return time.perf_counter()
        return time.process_time()

    def batches() -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        """The DataModule's loader epoch after epoch, as a hand-written loop iterates it."""
        for epoch in itertools.count():
            if hasattr(loader.batch_sampler, "set_epoch"):  # reaches the DataModule's EpochShuffle
                loader.batch_sampler.set_epoch(epoch)
            for x, y in loader:
                yield x.to(device, non_blocking=True), y.to(device, non_blocking=True)

    stream = batches()

    def run(n: int) -> None:
        for _ in range(n):
            x, y = next(stream)
            optimizer.zero_grad(set_to_none=True)
            torch.nn.functional.mse_loss(model(x), y).backward()
            optimizer.step()

    run(warmup)
    start = now()
    run(steps - warmup)
    return 1000 * (now() - start) / (steps - warmup)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer steps and repeats")
    parser.add_argument("--device", choices=["cpu", "cuda", "auto"], default="cpu")
    parser.add_argument("--smoke", action="store_true", help=SMOKE_HELP)
    args = parser.parse_args()
    cuda = args.device == "cuda" or (args.device == "auto" and torch.cuda.is_available())
    device = "cuda" if cuda else "cpu"
    torch.set_num_threads(1)
    os.environ.setdefault("WANDB_MODE", "disabled")
    skip_gpu_probe_on_cpu_machines()  # as litlab-train does, so that no contender pays torch's NVML probe
    if cuda:
        torch.set_float32_matmul_precision("high")  # litlab's default (extras.matmul_precision), for all
    if args.smoke:
        plan = {"default": (5, 1), "paper": (5, 1)}
    elif cuda:
        plan = {"default": (200, 3), "paper": (200, 2)}
    elif args.quick:
        plan = {"default": (200, 3), "paper": (50, 2)}
    else:
        plan = {"default": (600, 7), "paper": (150, 5)}
    device_overrides = ["trainer=gpu"] if cuda else []
    warmup = 2 if args.smoke else 20
    variants = {"batch_job": VARIANTS["batch_job"]} if cuda else VARIANTS  # nobody watches a GPU job's bar
    load_before = os.getloadavg()[0]
    rows = []
    for mode, mode_overrides in MODES.items():
        for name, size in SIZES.items():
            steps, repeats = plan[name]
            overrides = [*size, *mode_overrides, *device_overrides]
            times: dict[str, list[float]] = {variant: [] for variant in [*variants, "lightning_bare", "hand"]}
            for _ in range(repeats):
                for variant, extra in variants.items():
                    times[variant].append(litlab_step_ms([*overrides, *extra], steps, warmup, cuda))
                times["lightning_bare"].append(bare_lightning_step_ms(overrides, steps, warmup, cuda))
                times["hand"].append(hand_step_ms(overrides, steps, warmup, cuda))
            medians = {variant: statistics.median(values) for variant, values in times.items()}
            ratios = {
                variant: medians[variant] / medians["hand"] for variant in [*variants, "lightning_bare"]
            }
            rows.append(
                {
                    "mode": mode,
                    "size": name,
                    "overrides": overrides,
                    "steps_timed": steps - warmup,
                    "repeats": repeats,
                    "ms_per_step_median": medians,
                    "ms_per_step_min": {variant: min(values) for variant, values in times.items()},
                    "ratio_to_hand": ratios,
                    "litlab_to_lightning_bare": {
                        variant: medians[variant] / medians["lightning_bare"] for variant in variants
                    },
                    "target_ratio": TARGETS[name],
                    "meets_target": {variant: ratios[variant] <= TARGETS[name] for variant in variants},
                }
            )
            summary = "  ".join(f"{variant} {ratio:.3f}x" for variant, ratio in ratios.items())
            print(f"{mode:10s} {name:8s} hand {medians['hand']:8.3f} ms/step  {summary}", flush=True)
    payload = {
        "benchmark": "trainer_overhead",
        "quick": args.quick,
        "device": device,
        "gpu": torch.cuda.get_device_name() if cuda else None,
        "torch_version": torch.__version__,
        "lightning_version": L.__version__,
        "threads": 1,
        "clock": "wall time with cuda.synchronize" if cuda else "process CPU time",
        "variants": variants,
        "cpu_model": cpu_model(),
        "cpu_count": os.cpu_count(),
        "load_average_before_after": [load_before, os.getloadavg()[0]],
        "rows": rows,
    }
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / f"trainer_overhead{'_smoke' if args.smoke else '_cuda' if cuda else suffix(args)}.json"
    out.write_text(json.dumps(payload, indent=2) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
