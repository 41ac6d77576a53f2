"""A plain LightningDataModule: noisy y = sin(x_1 + ... + x_d) on U(-3, 3)^d, seeded."""

from __future__ import annotations

from collections.abc import Mapping

import lightning as L
import torch
from torch.utils.data import DataLoader, TensorDataset


class NoisySine(L.LightningDataModule):
    """Train/val/test splits of a d-dimensional noisy sine; ``data_spec`` tells the model d."""

    def __init__(
        self,
        n_features: int = 2,
        n_samples: int = 600,
        noise: float = 0.05,
        batch_size: int = 64,
        seed: int = 0,
    ) -> None:
        super().__init__()
        self.n_features, self.n_samples, self.noise = n_features, n_samples, noise
        self.batch_size, self.seed = batch_size, seed

    def data_spec(self) -> Mapping[str, int]:
        """What the model may know before training (litlab.contract)."""
        return {"n_features": self.n_features}

    def setup(self, stage: str | None = None) -> None:
        generator = torch.Generator().manual_seed(self.seed)
        x = torch.rand(self.n_samples, self.n_features, generator=generator) * 6 - 3
        y = torch.sin(x.sum(1, keepdim=True)) + self.noise * torch.randn(
            self.n_samples, 1, generator=generator
        )
        n_train, n_val = int(0.7 * self.n_samples), int(0.15 * self.n_samples)
        self.train_set = TensorDataset(x[:n_train], y[:n_train])
        self.val_set = TensorDataset(x[n_train : n_train + n_val], y[n_train : n_train + n_val])
        self.test_set = TensorDataset(x[n_train + n_val :], y[n_train + n_val :])

    def train_dataloader(self) -> DataLoader:
        generator = torch.Generator().manual_seed(self.seed)
        return DataLoader(self.train_set, batch_size=self.batch_size, shuffle=True, generator=generator)

    def val_dataloader(self) -> DataLoader:
        return DataLoader(self.val_set, batch_size=len(self.val_set))

    def test_dataloader(self) -> DataLoader:
        return DataLoader(self.test_set, batch_size=len(self.test_set))
