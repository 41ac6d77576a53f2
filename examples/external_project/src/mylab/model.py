"""A user's LightningModule: an MLP regressor whose input width comes from the data (``bind_data``)."""

from __future__ import annotations

from collections.abc import Collection, Mapping

import lightning as L
import matplotlib.pyplot as plt
import torch
from matplotlib.figure import Figure
from torch import nn


class TinyRegressor(L.LightningModule):
    """MLP n_features -> hidden -> 1 trained by MSE; offers figures and declares its metrics."""

    def __init__(self, hidden: int = 32, lr: float = 1e-2) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.net: nn.Module | None = None
        self._test_points: tuple[torch.Tensor, torch.Tensor] | None = None

    def bind_data(self, spec: Mapping[str, int]) -> None:
        """Build the network for the data's input width (called by litlab before training)."""
        if self.net is None:
            self.net = nn.Sequential(
                nn.Linear(spec["n_features"], self.hparams.hidden),
                nn.Tanh(),
                nn.Linear(self.hparams.hidden, 1),
            )

    def logged_metrics(self) -> Collection[str]:
        return {"train/loss", "val/mse", "test/mse"}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)

    def training_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> torch.Tensor:
        x, y = batch
        loss = nn.functional.mse_loss(self(x), y)
        self.log("train/loss", loss, on_step=False, on_epoch=True)
        return loss

    def validation_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> None:
        x, y = batch
        self.log("val/mse", nn.functional.mse_loss(self(x), y))

    def test_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> None:
        x, y = batch
        self._test_points = (x.sum(1).detach(), torch.stack([y[:, 0], self(x)[:, 0]], 1).detach())
        self.log("test/mse", nn.functional.mse_loss(self(x), y))

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.Adam(self.parameters(), lr=self.hparams.lr)

    def figures(self, stage: str) -> dict[str, Figure]:
        """Prediction against the target on the test set (written to plots/ and the image loggers)."""
        if stage != "test" or self._test_points is None:
            return {}
        s, values = self._test_points
        figure, axis = plt.subplots(figsize=(4, 3))
        axis.scatter(s, values[:, 0], s=6, label="target")
        axis.scatter(s, values[:, 1], s=6, label="prediction")
        axis.set_xlabel("x_1 + ... + x_d")
        axis.legend()
        return {"prediction": figure}
