"""Periodically adapt a spline network's grid to the data reaching it (pykan's grid update)."""

from __future__ import annotations

import lightning as L
import torch

from litlab.core.errors import LitlabError


class GridUpdateCallback(L.Callback):
    """Call ``pl_module.net.update_grid(x)`` on a training batch every ``every_n_epochs`` epochs.

    The paper's study uses no grid updates (so no experiment enables this by default); pykan and
    efficient-kan users expect them. Updates stop after ``stop_epoch`` so training can settle.
    """

    def __init__(
        self, every_n_epochs: int = 100, stop_epoch: int | None = None, grid_eps: float = 0.02
    ) -> None:
        if every_n_epochs < 1:
            raise ValueError(f"every_n_epochs must be >= 1, got {every_n_epochs}")
        self.every_n_epochs = every_n_epochs
        self.stop_epoch = stop_epoch
        self.grid_eps = grid_eps

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        net = getattr(pl_module, "net", None)
        if net is None or not hasattr(net, "update_grid"):
            raise LitlabError("callbacks.grid_update needs a model whose .net has update_grid (a KAN)")

    def on_train_batch_start(
        self, trainer: L.Trainer, pl_module: L.LightningModule, batch, batch_idx: int
    ) -> None:
        epoch = trainer.current_epoch
        if batch_idx != 0 or epoch == 0 or epoch % self.every_n_epochs:
            return
        if self.stop_epoch is not None and epoch > self.stop_epoch:
            return
        x = batch[0] if isinstance(batch, list | tuple) else batch["x"]
        with torch.no_grad():
            pl_module.net.update_grid(x, grid_eps=self.grid_eps)
