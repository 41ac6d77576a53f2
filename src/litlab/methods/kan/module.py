"""LightningModules for the KAN-initialization experiments: supervised regression and PINNs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import lightning as L
import matplotlib.pyplot as plt
import torch
from matplotlib.figure import Figure
from torch import nn

OptimizerFactory = Callable[..., torch.optim.Optimizer]
SchedulerFactory = Callable[..., torch.optim.lr_scheduler.LRScheduler]


def relative_l2(prediction: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """‖prediction − target‖₂ / ‖target‖₂ over all entries (the paper's test metric)."""
    return torch.linalg.vector_norm(prediction - target) / torch.linalg.vector_norm(target).clamp_min(1e-12)


class Regressor(L.LightningModule):
    """Fit ``net`` to (x, y) pairs with MSE; report relative L2 on validation and test.

    Test batches are accumulated so that relative L2 is computed over the whole evaluation grid,
    as in the paper, not averaged per batch.
    """

    def __init__(
        self,
        net: nn.Module,
        optimizer: OptimizerFactory,
        scheduler: SchedulerFactory | None = None,
        plot_resolution: int = 100,
    ) -> None:
        super().__init__()
        self.save_hyperparameters(logger=False, ignore=["net", "optimizer", "scheduler"])
        self.net = net
        self.optimizer_factory = optimizer
        self.scheduler_factory = scheduler
        self._eval_cache: dict[str, list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]] = {}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)

    def training_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> torch.Tensor:
        x, y = batch
        loss = nn.functional.mse_loss(self(x), y)
        self.log("train/loss", loss, on_step=False, on_epoch=True, prog_bar=True, batch_size=len(x))
        return loss

    def _eval_step(self, batch: tuple[torch.Tensor, torch.Tensor], stage: str) -> None:
        x, y = batch
        prediction = self(x)
        self.log(f"{stage}/loss", nn.functional.mse_loss(prediction, y), prog_bar=True, batch_size=len(x))
        self._eval_cache.setdefault(stage, []).append((x.detach(), prediction.detach(), y.detach()))

    def _eval_epoch_end(self, stage: str) -> None:
        parts = self._eval_cache.get(stage, [])
        if not parts:
            return
        prediction = torch.cat([p for _, p, _ in parts])
        target = torch.cat([t for _, _, t in parts])
        # Sum squares across processes so the metric is the global relative L2 under DDP.
        squares = torch.stack([(prediction - target).square().sum(), target.square().sum()])
        squares = self.all_gather(squares).reshape(-1, 2).sum(0)
        self.log(
            f"{stage}/rel_l2",
            (squares[0] / squares[1].clamp_min(1e-24)).sqrt(),
            prog_bar=True,
            sync_dist=False,
        )
        if stage != "test":
            self._eval_cache[stage] = []

    def validation_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> None:
        self._eval_step(batch, "val")

    def on_validation_epoch_end(self) -> None:
        self._eval_epoch_end("val")

    def test_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> None:
        self._eval_step(batch, "test")

    def on_test_epoch_start(self) -> None:
        self._eval_cache["test"] = []

    def on_test_epoch_end(self) -> None:
        self._eval_epoch_end("test")

    def configure_optimizers(self) -> Any:
        optimizer = self.optimizer_factory(params=self.parameters())
        if self.scheduler_factory is None:
            return optimizer
        scheduler = self.scheduler_factory(optimizer=optimizer)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "epoch"}}

    def figures(self, stage: str) -> dict[str, Figure]:
        """Target, prediction and error maps for 2-D inputs on the test grid."""
        parts = self._eval_cache.get("test", [])
        if stage != "test" or not parts:
            return {}
        x = torch.cat([p[0] for p in parts]).cpu()
        if x.shape[1] != 2:
            return {}
        prediction = torch.cat([p[1] for p in parts]).cpu()[:, 0]
        target = torch.cat([p[2] for p in parts]).cpu()[:, 0]
        fig, axes = plt.subplots(1, 3, figsize=(12, 3.6))
        panels = [("target", target), ("prediction", prediction), ("|error|", (prediction - target).abs())]
        for ax, (title, values) in zip(axes, panels):
            image = ax.tricontourf(x[:, 0], x[:, 1], values, levels=40, cmap="viridis")
            fig.colorbar(image, ax=ax)
            ax.set_title(title)
            ax.set_aspect("equal")
        fig.suptitle(f"relative L2 = {relative_l2(prediction, target):.3e}")
        return {"prediction": fig}
