"""Tabular regression for functional ANOVA models: Friedman-type functions with known components, a planted
pure three-way interaction, and the real regression sets scikit-learn ships.

Synthetic sets draw x ~ U(0, 1)^p (p >= the function's inputs; the rest are noise inputs) and
y = f(x) + N(0, noise^2), seeded (numpy PCG64). Their true functional ANOVA components are listed
(``SyntheticFunction.components``, 0-indexed variables):

- ``friedman1``: 10 sin(pi x0 x1) + 20 (x2 - 1/2)^2 + 10 x3 + 5 x4 (Friedman 1991); components
  {0}, {1}, {0, 1}, {2}, {3}, {4} (sin(pi x0 x1) has main effects as well as the interaction).
- ``planted3``: friedman1 + 40 x5 x6 x7. The planted product has, besides its main effects and pairwise
  projections, a three-way component 40 (x5 - 1/2)(x6 - 1/2)(x7 - 1/2) (sd 0.96) that no order-2 model
  can represent; components: friedman1's, {5}, {6}, {7}, {5, 6}, {5, 7}, {6, 7}, {5, 6, 7}.
- ``pure3``: friedman1 + 80 (x5 - 1/2)(x6 - 1/2)(x7 - 1/2), a *pure* three-way term (sd 1.92) whose main
  effects and pairwise projections are all zero: nothing of it is visible below order three.

Real sets, offline: ``diabetes`` (442 x 10, scikit-learn's bundled copy). ``california`` (20640 x 8) is
read from scikit-learn's data folder only if it is already there (it is downloaded, not bundled).
Boston housing, the paper's set, was removed from scikit-learn (1.2) for an ethically problematic
feature; ``diabetes`` (similar size: 442 vs 506 rows, 10 vs 13 inputs) stands in for it.

Splits are seeded; inputs are min-max scaled to [0, 1] with the training ranges and the response is
standardised with the training mean and sd (the DataModule; ``TabularSplits`` keeps the raw values).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from litlab.core.errors import ConfigError, LitlabError
from litlab.datamodules.base import RegressionDataModule, TensorBatchDataset

Components = tuple[tuple[int, ...], ...]


def friedman1(x: np.ndarray) -> np.ndarray:
    """10 sin(pi x0 x1) + 20 (x2 - 1/2)^2 + 10 x3 + 5 x4 for ``x: (n, >=5)``: (n,)."""
    return 10 * np.sin(np.pi * x[:, 0] * x[:, 1]) + 20 * (x[:, 2] - 0.5) ** 2 + 10 * x[:, 3] + 5 * x[:, 4]


def planted3(x: np.ndarray) -> np.ndarray:
    """friedman1 + 40 x5 x6 x7 (a three-way product with lower-order projections)."""
    return friedman1(x) + 40 * x[:, 5] * x[:, 6] * x[:, 7]


def pure3(x: np.ndarray) -> np.ndarray:
    """friedman1 + 80 (x5 - 1/2)(x6 - 1/2)(x7 - 1/2) (zero main effects and pairwise projections)."""
    return friedman1(x) + 80 * (x[:, 5] - 0.5) * (x[:, 6] - 0.5) * (x[:, 7] - 0.5)


@dataclass(frozen=True)
class SyntheticFunction:
    function: Callable[[np.ndarray], np.ndarray]
    n_inputs: int
    components: Components


FRIEDMAN1_COMPONENTS: Components = ((0,), (1,), (0, 1), (2,), (3,), (4,))
SYNTHETIC = {
    "friedman1": SyntheticFunction(friedman1, 5, FRIEDMAN1_COMPONENTS),
    "planted3": SyntheticFunction(
        planted3, 8, (*FRIEDMAN1_COMPONENTS, (5,), (6,), (7,), (5, 6), (5, 7), (6, 7), (5, 6, 7))
    ),
    "pure3": SyntheticFunction(pure3, 8, (*FRIEDMAN1_COMPONENTS, (5, 6, 7))),
}
REAL = ("diabetes", "california")


@dataclass
class TabularSplits:
    """Raw (unscaled) train/val/test arrays as float64 tensors; ``f_*`` the noiseless target (synthetic)."""

    x_train: torch.Tensor
    y_train: torch.Tensor
    x_val: torch.Tensor
    y_val: torch.Tensor
    x_test: torch.Tensor
    y_test: torch.Tensor
    components: Components
    feature_names: list[str]
    f_test: torch.Tensor | None = None


def _split_counts(n: int, val_fraction: float, test_fraction: float) -> tuple[int, int, int]:
    n_val, n_test = round(n * val_fraction), round(n * test_fraction)
    n_train = n - n_val - n_test
    if n_train < 2 or n_val < 1 or n_test < 1:
        raise ConfigError(
            f"{n} rows with val_fraction={val_fraction}, test_fraction={test_fraction} leave an empty split"
        )
    return n_train, n_val, n_test


def _real(name: str, data_home: str | None) -> tuple[np.ndarray, np.ndarray, list[str]]:
    from sklearn import datasets

    if name == "diabetes":
        bunch = datasets.load_diabetes()
    else:
        try:
            bunch = datasets.fetch_california_housing(data_home=data_home, download_if_missing=False)
        except OSError as error:
            raise LitlabError(
                "california housing is not in scikit-learn's data folder and litlab does not download; "
                "run sklearn.datasets.fetch_california_housing() once where a network is available "
                "(or pass data.data_home=<folder holding it>), or use data.name=diabetes"
            ) from error
    return (
        np.asarray(bunch.data, dtype=np.float64),
        np.asarray(bunch.target, dtype=np.float64),
        list(bunch.feature_names),
    )


def load_tabular(
    name: str,
    n_samples: int = 1000,
    n_features: int = 10,
    noise: float = 1.0,
    val_fraction: float = 0.2,
    test_fraction: float = 0.2,
    seed: int = 0,
    data_home: str | None = None,
) -> TabularSplits:
    """The train/val/test splits of one set (synthetic: ``n_samples`` rows of ``n_features`` inputs)."""
    rng = np.random.default_rng(seed)
    f_all = None
    if name in SYNTHETIC:
        spec = SYNTHETIC[name]
        if n_features < spec.n_inputs:
            raise ConfigError(f"{name} uses {spec.n_inputs} inputs; n_features={n_features} is too few")
        x = rng.uniform(size=(n_samples, n_features))
        f_all = spec.function(x)
        y = f_all + noise * rng.standard_normal(n_samples)
        components, names = spec.components, [f"x{j}" for j in range(n_features)]
    elif name in REAL:
        x, y, names = _real(name, data_home)
        components = ()
    else:
        raise ConfigError(f"unknown tabular set {name!r}; choose one of {sorted(SYNTHETIC) + list(REAL)}")
    n_train, n_val, _ = _split_counts(len(y), val_fraction, test_fraction)
    order = rng.permutation(len(y))
    parts = np.split(order, [n_train, n_train + n_val])
    t = [
        torch.from_numpy(a)
        for a in (x[parts[0]], y[parts[0]], x[parts[1]], y[parts[1]], x[parts[2]], y[parts[2]])
    ]
    f_test = None if f_all is None else torch.from_numpy(f_all[parts[2]])
    return TabularSplits(*t, components=components, feature_names=names, f_test=f_test)


@dataclass(frozen=True)
class Scaling:
    """Min-max scaling of inputs to [0, 1] and standardisation of the response, from training data."""

    x_low: torch.Tensor
    x_range: torch.Tensor
    y_mean: float
    y_std: float

    @classmethod
    def fit(cls, x: torch.Tensor, y: torch.Tensor) -> Scaling:
        low = x.min(0).values
        return cls(low, (x.max(0).values - low).clamp_min(1e-12), float(y.mean()), float(y.std()) or 1.0)

    def x(self, x: torch.Tensor) -> torch.Tensor:
        return (x - self.x_low) / self.x_range

    def y(self, y: torch.Tensor) -> torch.Tensor:
        return (y - self.y_mean) / self.y_std


class TabularDataModule(RegressionDataModule):
    """Scaled tabular regression: batches ``(x: (B, p) in [0, 1], y: (B, 1) standardised)``, float32.

    Args:
        name: ``friedman1`` | ``planted3`` | ``pure3`` | ``diabetes`` | ``california`` (module docstring).
        n_samples, n_features, noise: size, inputs and noise sd of a synthetic set (ignored for real ones).
        val_fraction, test_fraction: seeded split.
        batch_size: global training batch (None: full batch); eval_batch_size: None puts a split in one batch.
        data_home: scikit-learn's data folder for ``california`` (None: its default).
    """

    def __init__(
        self,
        name: str = "planted3",
        n_samples: int = 1000,
        n_features: int = 10,
        noise: float = 1.0,
        val_fraction: float = 0.2,
        test_fraction: float = 0.2,
        batch_size: int | None = None,
        eval_batch_size: int | None = None,
        seed: int = 0,
        data_home: str | None = None,
        num_workers: int = 0,
    ) -> None:
        if name not in SYNTHETIC and name not in REAL:
            raise ConfigError(f"unknown tabular set {name!r}; choose one of {sorted(SYNTHETIC) + list(REAL)}")
        self.splits: TabularSplits | None = None
        rows = n_samples if name in SYNTHETIC else None
        n_train = _split_counts(rows, val_fraction, test_fraction)[0] if rows else 0
        super().__init__(max(n_train, 1), batch_size, eval_batch_size, seed, num_workers)
        self.save_hyperparameters()
        self.name, self.data_home = name, data_home
        self.n_samples, self.n_features, self.noise = n_samples, n_features, noise
        self.val_fraction, self.test_fraction = val_fraction, test_fraction

    def load(self) -> TabularSplits:
        """The raw splits (loaded once)."""
        if self.splits is None:
            self.splits = load_tabular(
                self.name,
                self.n_samples,
                self.n_features,
                self.noise,
                self.val_fraction,
                self.test_fraction,
                self.seed,
                self.data_home,
            )
            self.n_train = len(self.splits.y_train)
            if self.hparams.batch_size is None:
                self.batch_size = self.n_train
            self.scaling = Scaling.fit(self.splits.x_train, self.splits.y_train)
        return self.splits

    def data_spec(self) -> dict:
        """Inputs, response scale and the true components (empty for real sets)."""
        splits = self.load()
        return {
            "n_features": splits.x_train.shape[1],
            "n_train": self.n_train,
            "y_mean": self.scaling.y_mean,
            "y_std": self.scaling.y_std,
            "components": [list(c) for c in splits.components],
            "feature_names": splits.feature_names,
        }

    def _dataset(self, x: torch.Tensor, y: torch.Tensor) -> TensorBatchDataset:
        return TensorBatchDataset(self.scaling.x(x).float(), self.scaling.y(y).float()[:, None])

    def setup(self, stage: str | None = None) -> None:
        if hasattr(self, "train_set"):
            return
        s = self.load()
        self.train_set = self._dataset(s.x_train, s.y_train)
        self.val_set = self._dataset(s.x_val, s.y_val)
        self.test_set = self._dataset(s.x_test, s.y_test)
