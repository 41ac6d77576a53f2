"""LightningModule: train one planner on expert demonstrations; open-loop ADE/FDE and anchor accuracy."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import lightning as L
import matplotlib.pyplot as plt
import torch
from matplotlib.figure import Figure

from litlab.methods.bridgedrive.anchors import nearest_anchor, plan_statistics
from litlab.methods.bridgedrive.planners import Planner
from litlab.optim import OptimizerFactory, SchedulerFactory, step_scheduled


class PlannerModule(L.LightningModule):
    """Fit ``planner.loss`` on ``(obs, plan)`` batches; validate plans sampled in ``sample_steps`` steps.

    The planner is built in ``setup`` from the DataModule's training plans (k-means anchors, per-index
    mean/std), which are buffers of the planner and so travel with checkpoints.

    Args:
        planner: partial ``Planner`` class (obs_dim, anchors, mean, std are filled in), or a built
            ``Planner`` (the study builds its planners from its own data split).
        n_anchors: K for k-means. sample_steps: decoder calls per plan at validation/test.
        scheduler: optional partial LR scheduler, stepped every optimizer step.
    """

    def __init__(
        self,
        planner: Callable[..., Planner] | Planner,
        optimizer: OptimizerFactory,
        n_anchors: int = 16,
        sample_steps: int = 2,
        scheduler: SchedulerFactory | None = None,
    ) -> None:
        super().__init__()
        self.save_hyperparameters(logger=False, ignore=["planner", "optimizer", "scheduler"])
        self.optimizer_factory, self.scheduler_factory = optimizer, scheduler
        built = isinstance(planner, Planner)
        self.planner_factory = None if built else planner
        self.planner: Planner | None = planner if built else None
        self._figure_batch: tuple[torch.Tensor, torch.Tensor] | None = None

    def setup(self, stage: str) -> None:
        if self.planner is None:
            datamodule = self.trainer.datamodule
            datamodule.setup(stage)
            stats = plan_statistics(datamodule.train_plans, self.hparams.n_anchors, seed=0)
            self.planner = self.planner_factory(obs_dim=datamodule.obs_dim, **stats)

    def training_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> torch.Tensor:
        losses = self.planner.loss(*batch)
        for name, value in losses.items():
            self.log(f"train/{name}", value, on_step=False, on_epoch=True, prog_bar=name == "loss")
        return losses["loss"]

    def _evaluate(self, batch: tuple[torch.Tensor, torch.Tensor], stage: str) -> None:
        obs, plan = batch
        generator = torch.Generator().manual_seed(0)
        predicted = self.planner.plan(obs, self.hparams.sample_steps, generator)
        error = (predicted - plan).norm(dim=-1)
        metrics = {
            "loss": self.planner.loss(obs, plan)["loss"],
            "ade": error.mean(),
            "fde": error[:, -1].mean(),
        }
        if self.planner.uses_anchors:
            target = nearest_anchor(plan, self.planner.anchors)
            metrics["anchor_accuracy"] = (self.planner.classify(obs) == target).float().mean()
        for name, value in metrics.items():
            self.log(f"{stage}/{name}", value, on_step=False, on_epoch=True, prog_bar=name == "ade")
        if self._figure_batch is None:
            self._figure_batch = (obs[:6].cpu(), plan[:6].cpu())

    def validation_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> None:
        self._evaluate(batch, "val")

    def test_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> None:
        self._evaluate(batch, "test")

    def configure_optimizers(self) -> Any:
        optimizer = self.optimizer_factory(params=self.parameters())
        scheduler = None if self.scheduler_factory is None else self.scheduler_factory(optimizer)
        return step_scheduled(optimizer, scheduler)

    def figures(self, stage: str) -> dict[str, Figure]:
        """Expert plan, sampled plan and (anchored planners) chosen anchor for a few validation scenes."""
        if stage != "test" or self._figure_batch is None:
            return {}
        obs, plan = self._figure_batch
        planner = self.planner.cpu()
        predicted = planner.plan(obs, self.hparams.sample_steps, torch.Generator().manual_seed(0))
        fig, axes = plt.subplots(2, 3, figsize=(10, 5), sharex=True, sharey=True)
        for i, ax in enumerate(axes.flat[: len(obs)]):
            if planner.uses_anchors:
                for anchor in planner.anchors:
                    ax.plot(anchor[:, 0], anchor[:, 1], color="0.85", lw=0.8)
                chosen = planner.anchors[planner.classify(obs[i : i + 1])[0]]
                ax.plot(chosen[:, 0], chosen[:, 1], "s--", color="tab:green", ms=3, label="chosen anchor")
            ax.plot(plan[i, :, 0], plan[i, :, 1], "o-", color="k", ms=3, label="expert")
            ax.plot(predicted[i, :, 0], predicted[i, :, 1], "x-", color="tab:red", ms=4, label="plan")
            ax.set_xlabel("x ahead (m)")
        axes.flat[0].set_ylabel("y right (m)")
        axes.flat[0].legend(fontsize=7)
        fig.suptitle(f"{type(planner).__name__}, {self.hparams.sample_steps} step(s)")
        fig.tight_layout()
        self.planner.to(self.device)
        return {"plans": fig}
