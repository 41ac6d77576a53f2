"""Gaussian linear regression with a power-law spectrum: the data of the learning-under-quantization papers.

x ~ N(0, H) with H = diag(λ), λ_i = i^-a (i = 1..d); y = ⟨w*, x⟩ + ξ with ξ ~ N(0, σ²) and w* = c·1
(Zhang, Su & Zou, ICLR 2026, take a = 2, c = 1, σ = 1). Samples are seeded and drawn once; a training
pass is one-pass SGD, so the train loader is never shuffled and its ``batch_size`` is the SGD batch B.
Batches are ``(x, y)`` with ``x: (B, d)`` and ``y: (B,)`` in ``dtype`` (float64 by default).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch.utils.data import DataLoader

from litlab.datamodules.base import RegressionDataModule, TensorBatchDataset, batch_loader

DTYPES = {"float32": torch.float32, "float64": torch.float64}


def power_law_spectrum(dim: int, exponent: float, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """λ_i = i^-exponent for i = 1..dim, shape ``(dim,)`` (descending)."""
    if dim < 1:
        raise ValueError(f"dim must be at least 1, got {dim}")
    if exponent <= 0:
        raise ValueError(f"the spectrum exponent must be positive, got {exponent}")
    return torch.arange(1, dim + 1, dtype=dtype) ** -exponent


def sample_linear_regression(
    n: int,
    spectrum: torch.Tensor,
    w_star: torch.Tensor,
    noise_std: float,
    generator: torch.Generator,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` pairs ``x: (n, d) ~ N(0, diag(spectrum))``, ``y: (n,) = x·w* + noise_std·N(0, 1)``."""
    x = torch.randn(n, len(spectrum), generator=generator, dtype=spectrum.dtype) * spectrum.sqrt()
    y = x @ w_star + noise_std * torch.randn(n, generator=generator, dtype=spectrum.dtype)
    return x, y


class LinearRegressionDataModule(RegressionDataModule):
    """Seeded Gaussian linear-regression data with ``λ_i = i^-exponent``, read once in order (one-pass SGD).

    Args:
        dim: d, the number of features.
        exponent: a in λ_i = i^-a.
        noise_std: σ, the label-noise standard deviation.
        w_star_value: every entry of w* (the paper's w* = 1).
        n_train: samples in the one training pass (SGD steps × batch_size).
        n_val, n_test: held-out samples for the empirical test risk.
        batch_size: B, the SGD batch (global, split across processes).
        eval_batch_size: None puts each evaluation set in one batch per process.
        dtype: ``float64`` (default; exact risk comparisons) or ``float32``.
    """

    def __init__(
        self,
        dim: int = 200,
        exponent: float = 2.0,
        noise_std: float = 1.0,
        w_star_value: float = 1.0,
        n_train: int = 16384,
        n_val: int = 2048,
        n_test: int = 8192,
        batch_size: int = 1,
        eval_batch_size: int | None = None,
        dtype: str = "float64",
        seed: int = 0,
        num_workers: int = 0,
    ) -> None:
        if dtype not in DTYPES:
            raise ValueError(f"dtype must be one of {sorted(DTYPES)}, got {dtype!r}")
        if noise_std < 0:
            raise ValueError(f"noise_std must be non-negative, got {noise_std}")
        if min(n_train, n_val, n_test) < 1:
            raise ValueError(f"n_train, n_val and n_test must be positive, got {n_train}, {n_val}, {n_test}")
        super().__init__(n_train, batch_size, eval_batch_size, seed, num_workers)
        self.dim, self.exponent, self.noise_std = dim, exponent, noise_std
        self.n_val, self.n_test = n_val, n_test
        self.dtype = DTYPES[dtype]
        self.spectrum = power_law_spectrum(dim, exponent, self.dtype)
        self.w_star_value = float(w_star_value)
        self.w_star = torch.full((dim,), self.w_star_value, dtype=self.dtype)

    def data_spec(self) -> Mapping[str, Any]:
        """What the model may know: the dimension, the spectrum and its exponent, w*, σ and the SGD batch."""
        return {
            "dim": self.dim,
            "exponent": self.exponent,
            "spectrum": self.spectrum.clone(),
            "w_star_value": self.w_star_value,
            "w_star": self.w_star.clone(),
            "noise_std": self.noise_std,
            "batch_size": self.batch_size,
        }

    def setup(self, stage: str | None = None) -> None:
        if getattr(self, "train_set", None) is not None:
            return
        generator = torch.Generator().manual_seed(self.seed)
        sets = [
            sample_linear_regression(n, self.spectrum, self.w_star, self.noise_std, generator)
            for n in (self.n_train, self.n_val, self.n_test)
        ]
        self.train_set, self.val_set, self.test_set = (TensorBatchDataset(x, y) for x, y in sets)

    def train_dataloader(self) -> DataLoader:
        """Samples in their drawn order: each is used once, as in one-pass SGD."""
        return batch_loader(self.train_set, self.per_device_batch_size, False, self.seed, self.num_workers)
