"""Fit one reconstruction setup through the project's Fitter: Adam on random batches of training frames.

The study and the claim test fit many setups × flights × seeds; each is a seeded ``Fitter.fit`` over the
same index batches the earlier hand-written loop drew, so ``trainer=`` reaches them and the numbers match.
"""

from __future__ import annotations

import lightning as L
import torch

from litlab.datamodules.events import UAVSequence
from litlab.fitting import Fitter
from litlab.methods.skyevents.objective import EventReconstruction


class ObjectiveFit(L.LightningModule):
    """What the Fitter trains: ``objective``'s total loss on a batch of frame indices of ``sequence``."""

    def __init__(
        self, objective: EventReconstruction, sequence: UAVSequence, lr: float, total_steps: int
    ) -> None:
        super().__init__()
        self.objective, self.sequence, self.lr, self.total_steps = objective, sequence, lr, total_steps
        self.history: list[float] = []
        self.optimizer: torch.optim.Optimizer | None = None

    def training_step(self, batch: torch.Tensor, batch_idx: int) -> torch.Tensor:
        loss = self.objective.losses(self.sequence, batch.cpu())["total"]
        self.history.append(float(loss.detach()))
        return loss

    def on_after_backward(self) -> None:
        self.objective.scene.after_backward()

    def on_train_batch_end(self, outputs: object, batch: torch.Tensor, batch_idx: int) -> None:
        self.objective.scene.after_step(self.optimizer, len(self.history), self.total_steps)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        self.optimizer = torch.optim.Adam(self.objective.scene.parameter_groups(), lr=self.lr)
        return self.optimizer


def frame_batches(train_index: torch.Tensor, steps: int, batch_size: int, seed: int) -> list[torch.Tensor]:
    """``steps`` batches of ``batch_size`` distinct training frames, each a seeded random draw."""
    generator = torch.Generator().manual_seed(seed)
    n = len(train_index)
    return [train_index[torch.randperm(n, generator=generator)[:batch_size]] for _ in range(steps)]


def fit(
    fitter: Fitter,
    objective: EventReconstruction,
    sequence: UAVSequence,
    train_index: torch.Tensor,
    steps: int,
    lr: float = 0.1,
    batch_size: int = 8,
    seed: int = 0,
) -> list[float]:
    """Adam on ``objective`` for ``steps`` random batches of ``train_index``; returns the total losses."""
    module = ObjectiveFit(objective, sequence, lr, steps)
    fitter.fit(module, frame_batches(train_index, steps, batch_size, seed), max_steps=steps, seed=seed)
    return module.history
