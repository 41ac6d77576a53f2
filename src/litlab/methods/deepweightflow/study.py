"""Small-scale studies shared by the claim test, the benchmark and the comparison task: fit a generator
on a zoo in-process, then time and score sampling."""

from __future__ import annotations

import logging
import time
from functools import partial

import lightning as L
import torch

from litlab.core.results import TaskOutput
from litlab.datamodules.weights import WeightsDataModule, Zoo
from litlab.methods.deepweightflow.architectures import zoo_accuracy
from litlab.methods.deepweightflow.canonical import align_zoo
from litlab.methods.deepweightflow.module import DDPMGenerator, FlowMatchingGenerator, WeightGenerator
from litlab.methods.deepweightflow.zoo import train_zoo
from litlab.task import TaskContext

log = logging.getLogger("litlab")


def paper_optimizers(steps: int) -> dict:
    """The paper's AdamW (lr 5e-4, wd 1e-5, betas 0.9/0.95) with a cosine decay to 1e-6 over ``steps``."""
    return {
        "optimizer": partial(torch.optim.AdamW, lr=5e-4, weight_decay=1e-5, betas=(0.9, 0.95)),
        "scheduler": partial(torch.optim.lr_scheduler.CosineAnnealingLR, T_max=steps, eta_min=1e-6),
    }


def fit_generator(
    kind: str, zoo: Zoo, n_train: int, steps: int, hidden: int = 256, seed: int = 0, **kwargs
) -> WeightGenerator:
    """Train a ``flow`` or ``ddpm`` generator for ``steps`` steps (batch 8) on the zoo's first ``n_train``
    members, quietly and without checkpoints; returns the fitted module (its ``space`` set)."""
    L.seed_everything(seed, verbose=False)
    datamodule = WeightsDataModule(lambda: zoo, n_train=n_train, batch_size=8)
    cls = FlowMatchingGenerator if kind == "flow" else DDPMGenerator
    module = cls(**paper_optimizers(steps), hidden=hidden, **kwargs)
    trainer = L.Trainer(
        max_steps=steps,
        max_epochs=-1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        limit_val_batches=0,
        accelerator="cpu",
        devices=1,
    )
    trainer.fit(module, datamodule=datamodule)
    return module


def timed_generation(module: WeightGenerator, n: int, seed: int = 0) -> tuple[float, torch.Tensor]:
    """Seconds to sample ``n`` networks (unflattened, BatchNorm refreshed) and their test accuracies."""
    start = time.perf_counter()
    params = module.generate(n, seed)
    seconds = time.perf_counter() - start
    data = module.space.data
    return seconds, zoo_accuracy(module.space.train.arch, params, data.x_test, data.y_test)


def canonicalisation_study(
    ctx: TaskContext,
    arch: str | dict,
    dataset: str = "digits",
    n_networks: int = 200,
    n_train: int = 100,
    epochs: int = 20,
    batch_size: int = 128,
    lr: float = 1e-2,
    steps: int = 2000,
    hidden: int = 256,
    n_generate: int = 100,
    seed: int = 0,
) -> TaskOutput:
    """Re-based vs raw training of the same flow on the same zoo: accuracy of ``n_generate`` sampled
    networks against the zoo's, written to ``results.json``."""
    zoo = train_zoo(arch, dataset, n_networks, epochs, batch_size, lr, seed)
    results: dict[str, float] = {"zoo/acc_mean": float(zoo.accuracy[:n_train].mean())}
    for arm, source in (("aligned", align_zoo(zoo)), ("raw", zoo)):
        module = fit_generator("flow", source, n_train, steps, hidden, seed)
        seconds, accuracy = timed_generation(module, n_generate, seed)
        results |= {
            f"{arm}/acc_mean": float(accuracy.mean()),
            f"{arm}/acc_std": float(accuracy.std()),
            f"{arm}/acc_min": float(accuracy.min()),
            f"{arm}/acc_ratio": float(accuracy.mean()) / results["zoo/acc_mean"],
            f"{arm}/sample_seconds": seconds,
        }
    log.info("canonicalisation study: %s", results)
    return {"metrics": results}
