"""Density-ratio data: Gaussian-mixture pairs with a known ratio, and covariate-shift splits of the
regression sets scikit-learn ships (no download).

A *pair* is a numerator P and a denominator Q; the ratio is β = dP/dQ. Mixture pairs:
Q = N(0, I_d) and P = (1/c) Σ_j N(μ_j, s² I_d), the means μ_j at distance ``separation`` from the origin
in seeded random directions, so log β(x) = logsumexp_j[log N(x; μ_j, s²I) − log N(x; 0, I)] − log c.
E_Q β² is finite only for s² < 2. Shift splits: a pool (diabetes, 442×10, or make_friedman1) is split into
a source (Q) and a target (P) by a selection probability s(x) = σ(a·z(x)) on the first principal component
z; then β(x) = [(1 − s(x)) / (1 − s̄)] / [s(x) / s̄] with s̄ the pool mean of s (the pool is the population).

Neural-estimator batches are ``(x, label, weight, log_beta)``: label +1 for P and −1 for Q, a weight that
makes the batch mean an unbiased estimate of the class-balanced risk mean_P ℓ(+1, f) + mean_Q ℓ(−1, f),
and the true log ratio (used for the test error only).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch.utils.data import DataLoader

from litlab.core.errors import ConfigError
from litlab.datamodules.base import GlobalBatchDataModule, TensorBatchDataset, batch_loader

SHIFT_DATASETS = ("diabetes", "friedman1")


@dataclass(frozen=True)
class GaussianMixturePair:
    """Q = N(0, I_dim), P = an equal-weight mixture of ``n_components`` N(μ_j, scale² I_dim), ‖μ_j‖ =
    ``separation`` in directions drawn from ``geometry_seed``. ``name`` reads like the paper's "c3,d1.70"."""

    dim: int
    n_components: int = 1
    separation: float = 1.0
    scale: float = 1.0
    geometry_seed: int = 0

    def __post_init__(self) -> None:
        if self.dim < 1 or self.n_components < 1:
            raise ConfigError(f"dim and n_components must be >= 1, got {self.dim}, {self.n_components}")
        if not 0 < self.scale < math.sqrt(2):
            raise ConfigError(f"scale must be in (0, sqrt(2)) so that E_Q beta^2 is finite, got {self.scale}")

    @property
    def name(self) -> str:
        return f"c{self.n_components},d{self.separation:.2f},dim{self.dim}"

    @property
    def means(self) -> torch.Tensor:
        """``(n_components, dim)`` float64 component means."""
        generator = torch.Generator().manual_seed(self.geometry_seed)
        directions = torch.randn(self.n_components, self.dim, generator=generator, dtype=torch.float64)
        return self.separation * directions / directions.norm(dim=1, keepdim=True)

    def sample_q(self, n: int, generator: torch.Generator) -> torch.Tensor:
        """``(n, dim)`` float64 draws from Q."""
        return torch.randn(n, self.dim, generator=generator, dtype=torch.float64)

    def sample_p(self, n: int, generator: torch.Generator) -> torch.Tensor:
        """``(n, dim)`` float64 draws from P (component, then Gaussian noise)."""
        component = torch.randint(self.n_components, (n,), generator=generator)
        noise = torch.randn(n, self.dim, generator=generator, dtype=torch.float64)
        return self.means[component] + self.scale * noise

    def second_moment(self) -> float:
        """E_Q β² = ∫ p²/q in closed form: (1/c²) Σ_jk s^{−2d} a^{−d/2} exp(‖μ_j + μ_k‖²/(2as⁴) −
        (‖μ_j‖² + ‖μ_k‖²)/(2s²)) with a = 2/s² − 1 (exp(μ_jᵀμ_k) at s = 1)."""
        s2, means = self.scale**2, self.means
        a = 2 / s2 - 1
        sums = (means[:, None] + means[None]).square().sum(-1)
        norms = means.square().sum(-1)
        exponent = sums / (2 * a * s2**2) - (norms[:, None] + norms[None]) / (2 * s2)
        log_terms = exponent - self.dim * math.log(s2) - self.dim / 2 * math.log(a)
        return float(torch.logsumexp(log_terms.flatten(), 0).exp()) / self.n_components**2

    def log_ratio(self, x: torch.Tensor) -> torch.Tensor:
        """log β(x) = log p(x) − log q(x) for ``x: (n, dim)``, shape ``(n,)``, exact."""
        x = x.double()
        s2 = self.scale**2
        log_p_parts = -torch.cdist(x, self.means).square() / (2 * s2) - self.dim * math.log(self.scale)
        log_p = torch.logsumexp(log_p_parts, dim=1) - math.log(self.n_components)
        return log_p + x.square().sum(1) / 2


@dataclass(frozen=True)
class ShiftSplit:
    """A source (Q) / target (P) split of a regression pool with the true ratio at every point."""

    x_source: torch.Tensor
    y_source: torch.Tensor
    x_target: torch.Tensor
    y_target: torch.Tensor
    log_beta_source: torch.Tensor
    log_beta_target: torch.Tensor


def regression_pool(dataset: str, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Standardised (X, y) of a set scikit-learn ships: ``diabetes`` (real) or ``friedman1`` (1000 draws)."""
    from sklearn.datasets import load_diabetes, make_friedman1

    if dataset == "diabetes":
        x, y = load_diabetes(return_X_y=True)
    elif dataset == "friedman1":
        x, y = make_friedman1(n_samples=1000, noise=1.0, random_state=seed)
    else:
        raise ConfigError(f"unknown shift dataset {dataset!r}; choose one of {', '.join(SHIFT_DATASETS)}")
    x = (x - x.mean(0)) / x.std(0)
    return x, (y - y.mean()) / y.std()


def covariate_shift_split(dataset: str = "diabetes", shift: float = 1.5, seed: int = 0) -> ShiftSplit:
    """Split the pool into source (kept with probability σ(shift·z)) and target, z the standardised first
    principal component; the split is seeded, the ratio exact for the pool taken as the population."""
    if shift < 0:
        raise ConfigError(f"shift must be >= 0, got {shift}")
    x, y = regression_pool(dataset, seed)
    _, _, vt = np.linalg.svd(x, full_matrices=False)
    direction = vt[0] * np.sign(vt[0][np.argmax(np.abs(vt[0]))])
    z = x @ direction
    z = (z - z.mean()) / z.std()
    keep = 1.0 / (1.0 + np.exp(-shift * z))
    source = np.random.default_rng(seed).uniform(size=len(x)) < keep
    log_beta = np.log1p(-keep) - np.log(keep) + np.log(keep.mean()) - np.log1p(-keep.mean())
    t = lambda a: torch.from_numpy(np.ascontiguousarray(a)).double()  # noqa: E731
    return ShiftSplit(
        x_source=t(x[source]),
        y_source=t(y[source]),
        x_target=t(x[~source]),
        y_target=t(y[~source]),
        log_beta_source=t(log_beta[source]),
        log_beta_target=t(log_beta[~source]),
    )


def labelled_set(
    x_p: torch.Tensor, x_q: torch.Tensor, log_beta_p: torch.Tensor, log_beta_q: torch.Tensor
) -> TensorBatchDataset:
    """P and Q rows as one float32 set of ``(x, label, weight, log_beta)``; weights (M+N)/M and (M+N)/N
    make a batch mean of weight·ℓ estimate mean_P ℓ(+1, f) + mean_Q ℓ(−1, f)."""
    m, n = len(x_p), len(x_q)
    x = torch.cat([x_p, x_q]).float()
    label = torch.cat([torch.ones(m), -torch.ones(n)])
    weight = torch.cat([torch.full((m,), (m + n) / max(m, 1)), torch.full((n,), (m + n) / max(n, 1))])
    return TensorBatchDataset(x, label, weight, torch.cat([log_beta_p, log_beta_q]).float())


def split_off(
    x: torch.Tensor, fraction: float, generator: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """A seeded random split of the rows of ``x`` into (rest, ``fraction`` of them)."""
    order = torch.randperm(len(x), generator=generator)
    cut = len(x) - max(1, round(fraction * len(x)))
    if cut < 1:
        raise ConfigError(f"a split of {fraction} leaves no training rows out of {len(x)}")
    return x[order[:cut]], x[order[cut:]]


class RatioDataModule(GlobalBatchDataModule):
    """Loaders of P-vs-Q batches for a neural ratio estimator; subclasses say where P and Q come from.

    A subclass's ``draw()`` returns the P rows, the Q rows and the Q test rows as ``(n, dim + 1)`` tensors
    (x, then log β); ``val_fraction`` of each of P and Q is held out for validation. ``batch_size=None``
    means full batch.
    """

    def __init__(self, batch_size: int | None, val_fraction: float, seed: int, num_workers: int) -> None:
        super().__init__(batch_size or 1, num_workers)
        if not 0 < val_fraction < 1:
            raise ConfigError(f"val_fraction must be in (0, 1), got {val_fraction}")
        self.full_batch = batch_size is None
        self.val_fraction = val_fraction
        self.seed = seed

    def setup(self, stage: str | None = None) -> None:
        if hasattr(self, "train_set"):
            return
        rows_p, rows_q, rows_test = self.draw()
        generator = torch.Generator().manual_seed(self.seed + 7919)
        train_p, val_p = split_off(rows_p, self.val_fraction, generator)
        train_q, val_q = split_off(rows_q, self.val_fraction, generator)
        self.train_set = labelled_set(train_p[:, :-1], train_q[:, :-1], train_p[:, -1], train_q[:, -1])
        self.val_set = labelled_set(val_p[:, :-1], val_q[:, :-1], val_p[:, -1], val_q[:, -1])
        test_x, test_lb = rows_test[:, :-1], rows_test[:, -1]
        self.test_set = labelled_set(test_x[:0], test_x, test_lb[:0], test_lb)
        if self.full_batch:
            self.batch_size = len(self.train_set)

    def data_spec(self) -> Mapping[str, Any]:
        self.setup()
        return {"dim": self.train_set.tensors[0].shape[1], "n_train": len(self.train_set)}

    def train_dataloader(self) -> DataLoader:
        shuffle = self.batch_size < len(self.train_set)
        return batch_loader(self.train_set, self.per_device_batch_size, shuffle, self.seed, self.num_workers)

    def _eval_loader(self, dataset: TensorBatchDataset) -> DataLoader:
        size = max(1, -(-len(dataset) // self.world_size))
        return batch_loader(dataset, size, False, self.seed, self.num_workers)

    def val_dataloader(self) -> DataLoader:
        return self._eval_loader(self.val_set)

    def test_dataloader(self) -> DataLoader:
        return self._eval_loader(self.test_set)


class MixtureRatioDataModule(RatioDataModule):
    """``n_p`` draws of P, ``n_q`` of Q from a :class:`GaussianMixturePair`; test: ``n_test`` fresh Q draws.

    The seed draws the samples; ``geometry_seed`` fixes the mixture's means (the family).
    """

    def __init__(
        self,
        dim: int = 5,
        n_components: int = 3,
        separation: float = 1.5,
        scale: float = 1.0,
        geometry_seed: int = 0,
        n_p: int = 1000,
        n_q: int = 1000,
        n_test: int = 20000,
        val_fraction: float = 0.2,
        batch_size: int | None = 256,
        seed: int = 0,
        num_workers: int = 0,
    ) -> None:
        super().__init__(batch_size, val_fraction, seed, num_workers)
        self.pair = GaussianMixturePair(dim, n_components, separation, scale, geometry_seed)
        self.n_p, self.n_q, self.n_test = n_p, n_q, n_test
        self.save_hyperparameters()

    def draw(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        generator = torch.Generator().manual_seed(self.seed)
        rows = []
        for x in (
            self.pair.sample_p(self.n_p, generator),
            self.pair.sample_q(self.n_q, generator),
            self.pair.sample_q(self.n_test, generator),
        ):
            rows.append(torch.cat([x, self.pair.log_ratio(x)[:, None]], dim=1))
        return rows[0], rows[1], rows[2]


class ShiftRatioDataModule(RatioDataModule):
    """P = target, Q = source of :func:`covariate_shift_split`; ``test_fraction`` of Q is the test set."""

    def __init__(
        self,
        dataset: str = "diabetes",
        shift: float = 1.5,
        test_fraction: float = 0.25,
        val_fraction: float = 0.2,
        batch_size: int | None = None,
        seed: int = 0,
        num_workers: int = 0,
    ) -> None:
        super().__init__(batch_size, val_fraction, seed, num_workers)
        self.dataset, self.shift, self.test_fraction = dataset, shift, test_fraction
        self.save_hyperparameters()

    def draw(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        split = covariate_shift_split(self.dataset, self.shift, self.seed)
        rows_p = torch.cat([split.x_target, split.log_beta_target[:, None]], dim=1)
        rows_q = torch.cat([split.x_source, split.log_beta_source[:, None]], dim=1)
        rows_q, rows_test = split_off(rows_q, self.test_fraction, torch.Generator().manual_seed(self.seed))
        return rows_p, rows_q, rows_test
