"""The neural ratio estimator: an MLP f(x) fitted by a Bregman loss, β̂ = g(f) (the paper's deep LR)."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

import lightning as L
import matplotlib.pyplot as plt
import torch
from matplotlib.figure import Figure
from torch import nn

from litlab.core.errors import ConfigError
from litlab.methods.dre.losses import get_loss

Batch = tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]
ACTIVATIONS = {"relu": nn.ReLU, "silu": nn.SiLU, "tanh": nn.Tanh}


def mlp(n_in: int, hidden: Sequence[int], activation: str = "silu") -> nn.Sequential:
    """``n_in`` → hidden widths → 1, with ``activation`` between layers; maps ``(B, n_in)`` to ``(B, 1)``."""
    if activation not in ACTIVATIONS:
        raise ConfigError(f"unknown activation {activation!r}; choose one of {', '.join(ACTIVATIONS)}")
    layers: list[nn.Module] = []
    for width in hidden:
        layers += [nn.Linear(n_in, width), ACTIVATIONS[activation]()]
        n_in = width
    return nn.Sequential(*layers, nn.Linear(n_in, 1))


class NeuralRatioEstimator(L.LightningModule):
    """Minimise the class-balanced Bregman risk mean_P ℓ(+1, f) + mean_Q ℓ(−1, f) with an MLP f.

    Batches are ``(x, label, weight, log_beta)`` (:mod:`litlab.datamodules.density_ratio`): the batch mean
    of weight·ℓ(label, f) estimates the risk. Logs ``*/risk`` (usable for selection: no β needed) and
    ``val/error``, ``test/error`` = 2·mean_Q B_F(β, β̂) against the true ratio. ``snapshot`` records f on
    given inputs at chosen epochs, so one fit yields the candidates of an epoch grid.

    Args:
        loss: ``lr`` (default, deep logistic regression), ``kulsif``, ``exp`` or ``sq``.
        hidden: hidden widths of the MLP; ``activation``: relu, silu or tanh.
        lr, weight_decay: AdamW's step size and decoupled weight decay (the regulariser of the grid).
    """

    def __init__(
        self,
        loss: str = "lr",
        hidden: Sequence[int] = (64, 64),
        activation: str = "silu",
        lr: float = 1e-3,
        weight_decay: float = 0.0,
    ) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.loss = get_loss(loss)
        self.hidden, self.activation = list(hidden), activation
        self.net: nn.Module | None = None
        self._snapshot_inputs: dict[str, torch.Tensor] = {}
        self._snapshot_epochs: set[int] = set()
        self.snapshots: dict[int, dict[str, torch.Tensor]] = {}
        self._epochs_done = 0
        self._test_pairs: list[tuple[torch.Tensor, torch.Tensor]] = []

    def bind_data(self, spec: Mapping[str, Any]) -> None:
        """Build the MLP for the data's input dimension (``spec["dim"]``)."""
        self.net = mlp(int(spec["dim"]), self.hidden, self.activation)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.net is None:
            raise ConfigError("NeuralRatioEstimator needs bind_data(spec) before use (the input dimension)")
        return self.net(x)[:, 0]

    def snapshot(self, inputs: Mapping[str, torch.Tensor], epochs: Collection[int]) -> None:
        """Record f on each of ``inputs`` after each epoch in ``epochs`` (1-based) into ``self.snapshots``."""
        self._snapshot_inputs = dict(inputs)
        self._snapshot_epochs = set(epochs)
        self.snapshots = {}

    def _risk(self, batch: Batch) -> tuple[torch.Tensor, torch.Tensor]:
        x, label, weight, _ = batch
        f = self(x)
        pointwise = torch.where(label > 0, self.loss.pos(f), self.loss.neg(f))
        return (weight * pointwise).mean(), f

    def _error(self, batch: Batch, f: torch.Tensor) -> torch.Tensor:
        _, label, _, log_beta = batch
        q = label < 0
        return self.loss.error(log_beta[q].double().exp(), f[q].double())

    def training_step(self, batch: Batch, batch_idx: int) -> torch.Tensor:
        risk, _ = self._risk(batch)
        self.log("train/risk", risk, on_step=False, on_epoch=True, prog_bar=True, batch_size=len(batch[0]))
        return risk

    def validation_step(self, batch: Batch, batch_idx: int) -> None:
        risk, f = self._risk(batch)
        self.log("val/risk", risk, prog_bar=True, batch_size=len(batch[0]))
        self.log("val/error", self._error(batch, f).float(), batch_size=int((batch[1] < 0).sum()))

    def test_step(self, batch: Batch, batch_idx: int) -> None:
        f = self(batch[0])
        self.log("test/error", self._error(batch, f).float(), batch_size=len(batch[0]))
        self._test_pairs.append((batch[3].detach().cpu(), f.detach().cpu()))

    def on_test_epoch_start(self) -> None:
        self._test_pairs = []

    def on_train_epoch_end(self) -> None:
        self._epochs_done += 1
        if self._epochs_done in self._snapshot_epochs:
            with torch.no_grad():
                self.snapshots[self._epochs_done] = {
                    name: self(x.to(self.device)).detach().double().cpu()
                    for name, x in self._snapshot_inputs.items()
                }

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.AdamW(
            self.parameters(), lr=self.hparams.lr, weight_decay=self.hparams.weight_decay
        )

    def logged_metrics(self) -> Collection[str]:
        return ("train/risk", "val/risk", "val/error", "test/error")

    def figures(self, stage: str) -> dict[str, Figure]:
        """β̂ against the true β on the test points (log-log), with the identity line."""
        if stage != "test" or not self._test_pairs:
            return {}
        log_beta = torch.cat([p[0] for p in self._test_pairs]).double()
        beta_hat = self.loss.link(torch.cat([p[1] for p in self._test_pairs]).double())
        fig, ax = plt.subplots(figsize=(4.2, 4))
        ax.scatter(log_beta.exp(), beta_hat.clamp_min(1e-6), s=2, alpha=0.3)
        low, high = float(log_beta.exp().min()), float(log_beta.exp().max())
        ax.plot([low, high], [low, high], "k--", lw=1)
        ax.set(
            xscale="log", yscale="log", xlabel="true β", ylabel="estimated β", title=f"{self.loss.name} MLP"
        )
        return {"ratio_fit": fig}
