"""LightningModules that learn a distribution over a zoo's flattened weights and, at test time, sample
networks and score them on the zoo's task without fine-tuning."""

from __future__ import annotations

import abc
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import lightning as L
import matplotlib.pyplot as plt
import torch
from matplotlib.figure import Figure

from litlab.datamodules.weights import WeightSpace, Zoo, save_zoo
from litlab.methods.deepweightflow.architectures import batched_logits, build_network, recompute_batchnorm
from litlab.methods.deepweightflow.generative import (
    DDPMSchedule,
    VelocityNet,
    ddpm_loss,
    flow_matching_loss,
    sample_ddpm,
    sample_flow,
)
from litlab.optim import OptimizerFactory, SchedulerFactory, step_scheduled


class WeightGenerator(L.LightningModule, abc.ABC):
    """Shared wiring: the backbone is built in ``bind_data`` from the data's weight dimension;
    the test epoch samples ``n_generate`` networks, scores each and their ensembles on the task's test
    split, and writes them to ``<run folder>/generated`` (a zoo folder)."""

    def __init__(
        self,
        optimizer: OptimizerFactory,
        scheduler: SchedulerFactory | None = None,
        hidden: int = 256,
        time_dim: int = 64,
        dropout: float = 0.1,
        n_generate: int = 100,
        ensemble_sizes: Sequence[int] = (10, 50, 100),
        sample_seed: int = 0,
    ) -> None:
        super().__init__()
        self.save_hyperparameters(logger=False, ignore=["optimizer", "scheduler"])
        self.optimizer_factory = optimizer
        self.scheduler_factory = scheduler
        self.net: VelocityNet | None = None
        self.space: WeightSpace | None = None
        self._test: dict[str, Any] = {}

    def bind_data(self, spec: Mapping[str, Any]) -> None:
        """Build the backbone for the weight dimension (``spec`` from ``WeightsDataModule.data_spec``)."""
        self.space = spec["space"]
        if self.net is None:
            hp = self.hparams
            self.net = VelocityNet(spec["dim"], hp.hidden, hp.time_dim, hp.dropout)
            self.prepare(self.space.encode(self.space.train.params).float())

    def logged_metrics(self) -> list[str]:
        """``train/loss``, ``val/loss`` (held-out networks' vectors) and the test epoch's scores."""
        test = ["gen_acc_mean", "gen_acc_std", "gen_acc_min", "zoo_acc_mean", "acc_ratio", "sample_seconds"]
        test += [f"ensemble_acc_{k}" for k in self.hparams.ensemble_sizes]
        return ["train/loss", "val/loss", *(f"test/{k}" for k in test)]

    def prepare(self, x_train: torch.Tensor) -> None:
        """Hook for data-dependent buffers (``x_train: (n, d)``); nothing by default."""

    @abc.abstractmethod
    def loss(self, x1: torch.Tensor) -> torch.Tensor:
        """Training objective on a batch of weight vectors ``(batch, d)``."""

    @abc.abstractmethod
    def sample(self, n: int, generator: torch.Generator) -> torch.Tensor:
        """``n`` new weight vectors ``(n, d)``."""

    def training_step(self, batch: list[torch.Tensor], batch_idx: int) -> torch.Tensor:
        loss = self.loss(batch[0])
        self.log("train/loss", loss, on_step=False, on_epoch=True, prog_bar=True, batch_size=len(batch[0]))
        return loss

    def validation_step(self, batch: list[torch.Tensor], batch_idx: int) -> None:
        self.log("val/loss", self.loss(batch[0]), prog_bar=True, batch_size=len(batch[0]))

    def generate(self, n: int, seed: int | None = None) -> dict[str, torch.Tensor]:
        """Sample ``n`` networks as stacked parameters (BatchNorm statistics recomputed on the train set)."""
        assert self.space is not None and self.net is not None
        self.net.eval()
        generator = torch.Generator().manual_seed(self.hparams.sample_seed if seed is None else seed)
        params = self.space.decode(self.sample(n, generator).cpu())
        return recompute_batchnorm(self.space.train.arch, params, self.space.data.x_train)

    def on_test_epoch_start(self) -> None:
        # fast_dev_run is a wiring check: two networks exercise the same path as a hundred
        n = min(2, self.hparams.n_generate) if self.trainer.fast_dev_run else self.hparams.n_generate
        start = time.perf_counter()
        params = self.generate(n)
        seconds = time.perf_counter() - start
        self._test = {"params": params, "seconds": seconds, "probs": [], "labels": []}

    def test_step(self, batch: list[torch.Tensor], batch_idx: int) -> None:
        assert self.space is not None
        x, y = batch
        net = build_network(self.space.train.arch).eval()
        logits = batched_logits(net, self._test["params"], x.cpu())  # (networks, batch, classes)
        self._test["probs"].append(logits.softmax(-1))
        self._test["labels"].append(y.cpu())

    def on_test_epoch_end(self) -> None:
        assert self.space is not None
        probs = torch.cat(self._test["probs"], 1)  # (networks, n_test, classes)
        labels = torch.cat(self._test["labels"])
        accuracy = (probs.argmax(-1) == labels).float().mean(1)
        zoo_mean = float(self.space.train.accuracy.mean())
        metrics = {
            "gen_acc_mean": accuracy.mean(),
            "gen_acc_std": accuracy.std() if len(accuracy) > 1 else torch.tensor(0.0),
            "gen_acc_min": accuracy.min(),
            "zoo_acc_mean": torch.tensor(zoo_mean),
            "acc_ratio": accuracy.mean() / zoo_mean,
            "sample_seconds": torch.tensor(self._test["seconds"]),
        }
        for k in self.hparams.ensemble_sizes:
            if k <= len(accuracy):
                metrics[f"ensemble_acc_{k}"] = (probs[:k].mean(0).argmax(-1) == labels).float().mean()
        self.log_dict({f"test/{k}": v for k, v in metrics.items()})
        self._test["accuracy"] = accuracy
        if self.trainer.is_global_zero and not getattr(self.trainer, "fast_dev_run", False):
            train = self.space.train
            seeds = list(range(len(accuracy)))
            generated = Zoo(
                self._test["params"],
                train.arch,
                train.dataset,
                seeds,
                accuracy,
                train.canonical,
                train.reference,
            )
            save_zoo(generated, Path(self.trainer.default_root_dir) / "generated")

    def configure_optimizers(self) -> Any:
        optimizer = self.optimizer_factory(params=self.parameters())
        scheduler = None if self.scheduler_factory is None else self.scheduler_factory(optimizer=optimizer)
        return step_scheduled(optimizer, scheduler)

    def figures(self, stage: str) -> dict[str, Figure]:
        """Histogram of the generated networks' accuracies against the training zoo's."""
        if stage != "test" or "accuracy" not in self._test or self.space is None:
            return {}
        zoo, generated = self.space.train.accuracy, self._test["accuracy"]
        bins = torch.linspace(float(min(zoo.min(), generated.min())), 1.0, 40).numpy()
        fig, ax = plt.subplots(figsize=(5, 3.2))
        ax.hist(zoo.numpy(), bins=bins, alpha=0.6, label="zoo (train)")
        ax.hist(generated.numpy(), bins=bins, alpha=0.6, label="generated")
        ax.set_xlabel("test accuracy")
        ax.set_ylabel("networks")
        ax.legend()
        return {"accuracy": fig}


class FlowMatchingGenerator(WeightGenerator):
    """DeepWeightFlow: linear-path CFM from N(0, σ_s²I) (σ_s = 0.01) with path noise σ = 0.001;
    sampling integrates the learned velocity with RK4 (or Euler) over a ``steps``-point grid."""

    def __init__(
        self,
        optimizer: OptimizerFactory,
        scheduler: SchedulerFactory | None = None,
        source_std: float = 0.01,
        sigma: float = 0.001,
        solver: str = "rk4",
        steps: int = 100,
        **kwargs: Any,
    ) -> None:
        super().__init__(optimizer, scheduler, **kwargs)
        self.save_hyperparameters(logger=False, ignore=["optimizer", "scheduler"])

    def loss(self, x1: torch.Tensor) -> torch.Tensor:
        return flow_matching_loss(self.net, x1, self.hparams.source_std, self.hparams.sigma)

    def sample(self, n: int, generator: torch.Generator) -> torch.Tensor:
        hp = self.hparams
        return sample_flow(self.net, n, self.space.dim, hp.source_std, hp.steps, hp.solver, generator)


class DDPMGenerator(WeightGenerator):
    """Baseline: a DDPM (linear β, T steps, ancestral sampling) on the same backbone, on per-coordinate
    standardised vectors. ``prediction="sample"`` (x₀-prediction) by default: the backbone's h/2
    bottleneck cannot output full-rank noise, so ε-prediction stalls near loss 1 (see the README)."""

    def __init__(
        self,
        optimizer: OptimizerFactory,
        scheduler: SchedulerFactory | None = None,
        timesteps: int = 1000,
        beta_start: float = 1e-4,
        beta_end: float = 0.02,
        prediction: str = "sample",
        **kwargs: Any,
    ) -> None:
        super().__init__(optimizer, scheduler, **kwargs)
        self.save_hyperparameters(logger=False, ignore=["optimizer", "scheduler"])
        self.schedule = DDPMSchedule(timesteps, beta_start, beta_end)
        self.register_buffer("mean", torch.zeros(0))
        self.register_buffer("std", torch.ones(0))

    def prepare(self, x_train: torch.Tensor) -> None:
        self.mean = x_train.mean(0)
        self.std = x_train.std(0).clamp_min(1e-8)

    def loss(self, x1: torch.Tensor) -> torch.Tensor:
        return ddpm_loss(self.net, self.schedule, (x1 - self.mean) / self.std, self.hparams.prediction)

    def sample(self, n: int, generator: torch.Generator) -> torch.Tensor:
        x = sample_ddpm(self.net, self.schedule, n, self.space.dim, generator, self.hparams.prediction)
        return x * self.std + self.mean
