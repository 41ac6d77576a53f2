"""LightningModules for the KAN-initialization experiments: supervised regression and PINNs."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import lightning as L
import matplotlib.pyplot as plt
import torch
from matplotlib.figure import Figure
from torch import nn

from litlab.core.errors import ConfigError, LitlabError
from litlab.optim import OptimizerFactory, SchedulerFactory, step_scheduled

NetFactory = Callable[..., nn.Module]


def relative_l2(prediction: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """‖prediction − target‖₂ / ‖target‖₂ over all entries (the paper's test metric)."""
    return torch.linalg.vector_norm(prediction - target) / torch.linalg.vector_norm(target).clamp_min(1e-12)


class Regressor(L.LightningModule):
    """Fit ``net`` to (x, y) pairs with MSE; report relative L2 on validation and test.

    ``net`` is a module, or a factory called as ``net(n_in=..., n_out=...)`` in ``bind_data`` with the
    widths of the data module's ``data_spec()`` (configs pass ``build_kan`` as a partial, so a Feynman
    formula's input count reaches the network without the config naming it). Test batches are accumulated
    so that relative L2 is computed over the whole evaluation grid, as in the paper, not averaged per batch.
    """

    def __init__(
        self,
        net: nn.Module | NetFactory,
        optimizer: OptimizerFactory,
        scheduler: SchedulerFactory | None = None,
        plot_resolution: int = 100,
    ) -> None:
        super().__init__()
        self.save_hyperparameters(logger=False, ignore=["net", "optimizer", "scheduler"])
        self.net: nn.Module | None = net if isinstance(net, nn.Module) else None
        self.net_factory: NetFactory | None = None if isinstance(net, nn.Module) else net
        self.optimizer_factory = optimizer
        self.scheduler_factory = scheduler
        self._eval_cache: dict[str, list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]] = {}

    def bind_data(self, spec: Mapping[str, Any]) -> None:
        """Build the network for the data's ``n_in``/``n_out`` (or check that a given one fits them)."""
        n_in, n_out = int(spec["n_in"]), int(spec["n_out"])
        if self.net_factory is None:
            widths = getattr(self.net, "widths", None)
            if widths is not None and (widths[0], widths[-1]) != (n_in, n_out):
                raise ConfigError(
                    f"the network maps {widths[0]} -> {widths[-1]} values but the data has "
                    f"n_in={n_in}, n_out={n_out}"
                )
            return
        fixed = getattr(self.net_factory, "keywords", {})
        for key, value in (("n_in", n_in), ("n_out", n_out)):
            if fixed.get(key) not in (None, value):
                raise ConfigError(
                    f"model.net.{key}={fixed[key]} but the data has {key}={value}; leave model.net.{key} "
                    "unset: the data decides it"
                )
        self.net = self.net_factory(**{**fixed, "n_in": n_in, "n_out": n_out})

    def logged_metrics(self) -> set[str]:
        """The keys this module logs (checked against ``optimized_metric`` before training)."""
        return {
            "train/loss",
            *(f"{stage}/{name}" for stage in ("val", "test") for name in ("loss", "rel_l2")),
        }

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x: (batch, n_in) -> (batch, n_out)."""
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
        if self.net is None:
            raise LitlabError(
                f"{type(self).__name__} has no network yet: call bind_data(data.data_spec()) first"
            )
        optimizer = self.optimizer_factory(params=self.parameters())
        scheduler = None if self.scheduler_factory is None else self.scheduler_factory(optimizer=optimizer)
        return step_scheduled(optimizer, scheduler)

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
