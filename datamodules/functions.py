"""2-D function-fitting targets of the KAN initialisation study (Rigas et al., ICLR 2026) and their data.

The five targets reproduce ``src/functions.py`` of srigas/KAN_Initialization_Schemes with scipy.special;
inputs are ``x: (N, 2)`` arrays on [-1, 1]^2 and outputs ``(N, 1)``:

- f1 ``product``:        x y
- f2 ``exp_sin``:        exp(sin(pi x) + y^2)
- f3 ``bessel``:         I1(x) + exp(I1e(y)) + sin(x y)
- f4 ``fresnel``:        S(z) C(z) with (S, C) the Fresnel integrals and z = f3(x, y) + erfinv(y)
- f5 ``erf_piecewise``:  y sign(0.5 - x) + erf(x) g, with g = x y if x y < 1 else 1 / (x y)
  (sign(0.5 - x) is +1 for x < 0.5 and -1 otherwise)

Data follow the paper: N = 5000 points from U(-1, 1)^2, 80/20 train/validation split, and relative L2
on a uniform 200 x 200 grid (the test set). Batches are ``(x, y)`` float32 tuples, ``x: (B, 2)``,
``y: (B, 1)``.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch
from scipy import special

from litlab.datamodules.base import RegressionDataModule, TensorBatchDataset

TargetFunction = Callable[[np.ndarray], np.ndarray]


def product(x: np.ndarray) -> np.ndarray:
    """f1: x y."""
    return x[:, [0]] * x[:, [1]]


def exp_sin(x: np.ndarray) -> np.ndarray:
    """f2: exp(sin(pi x) + y^2)."""
    return np.exp(np.sin(np.pi * x[:, [0]]) + x[:, [1]] ** 2)


def bessel(x: np.ndarray) -> np.ndarray:
    """f3: I1(x) + exp(I1e(y)) + sin(x y), with I1 the modified Bessel function and I1e its scaled form."""
    return special.i1(x[:, [0]]) + np.exp(special.i1e(x[:, [1]])) + np.sin(x[:, [0]] * x[:, [1]])


def fresnel(x: np.ndarray) -> np.ndarray:
    """f4: S(z) C(z) with z = f3 + erfinv(y); on y = +-1 erfinv is infinite and S C = 1/4, as in scipy."""
    sine, cosine = special.fresnel(bessel(x) + special.erfinv(x[:, [1]]))
    return sine * cosine


def erf_piecewise(x: np.ndarray) -> np.ndarray:
    """f5: y sign(0.5 - x) + erf(x) g(x y), with g(p) = p for p < 1 and 1 / p otherwise."""
    xy = product(x)
    with np.errstate(divide="ignore"):  # 1 / xy is only selected where xy >= 1, never at 0
        folded = np.where(xy < 1, xy, 1 / xy)
    return x[:, [1]] * np.where(x[:, [0]] < 0.5, 1.0, -1.0) + special.erf(x[:, [0]]) * folded


FUNCTIONS: dict[str, TargetFunction] = {
    "f1": product,
    "f2": exp_sin,
    "f3": bessel,
    "f4": fresnel,
    "f5": erf_piecewise,
}
ALIASES: dict[str, str] = {fn.__name__: key for key, fn in FUNCTIONS.items()}


def get_function(name: str) -> TargetFunction:
    """The target called ``name`` (``f1``..``f5`` or its descriptive alias)."""
    key = ALIASES.get(name, name)
    if key not in FUNCTIONS:
        known = ", ".join(f"{k} ({FUNCTIONS[k].__name__})" for k in FUNCTIONS)
        raise ValueError(f"unknown function-fitting target {name!r}; choose one of {known}")
    return FUNCTIONS[key]


def evaluate(function: TargetFunction, x: torch.Tensor) -> torch.Tensor:
    """``function`` at float32 points ``x: (N, d)``, computed in float64 and returned as ``(N, 1)`` float32.

    Computing from the float32 inputs keeps every (x, y) pair exact for the stored x.
    """
    return torch.from_numpy(function(x.double().numpy())).float()


def sample_uniform(n: int, dim: int, seed: int, low: float = -1.0, high: float = 1.0) -> torch.Tensor:
    """``(n, dim)`` float32 points from U(low, high)^dim, reproducible for a given seed (numpy PCG64)."""
    return torch.from_numpy(np.random.default_rng(seed).uniform(low, high, size=(n, dim))).float()


def uniform_grid(resolution: int, dim: int = 2, low: float = -1.0, high: float = 1.0) -> torch.Tensor:
    """``(resolution**dim, dim)`` float32 tensor grid, first coordinate fastest (``meshgrid`` 'xy' order).

    This is the ordering of the official evaluation, so ``y.reshape(res, res)`` is an image with rows = y.
    """
    axis = torch.linspace(low, high, resolution, dtype=torch.float64)
    mesh = torch.meshgrid(*[axis] * dim, indexing="xy")
    return torch.stack([m.reshape(-1) for m in mesh], dim=-1).float()


def split_sizes(n_samples: int, train_fraction: float) -> tuple[int, int]:
    """(n_train, n_val) for an i.i.d. sample; both must be positive."""
    n_train = round(n_samples * train_fraction)
    if not 0 < n_train < n_samples:
        raise ValueError(
            f"train_fraction={train_fraction} of n_samples={n_samples} leaves an empty train or val split"
        )
    return n_train, n_samples - n_train


class FunctionFitDataModule(RegressionDataModule):
    """Seeded 2-D regression data for one target: train/val from U(-1, 1)^2, test on a dense grid.

    Args:
        function: ``f1``..``f5`` or an alias (``product``, ``exp_sin``, ``bessel``, ``fresnel``,
            ``erf_piecewise``).
        n_samples: points drawn from U(-1, 1)^2 (paper: 5000), split ``train_fraction`` / rest (80/20).
        grid_resolution: points per axis of the test grid (paper: 200, i.e. 200^2 points).
        batch_size: the global training batch; ``None`` means full batch (``n_train``), as in the paper.
        eval_batch_size: global batch for val/test; ``None`` puts each whole set in one batch.
        seed: seeds the sample and the shuffling of mini-batches.
        steps_per_epoch: full batch only: identical full-batch steps per epoch (the paper's N epochs are
            N / steps_per_epoch trainer epochs; Lightning's per-epoch cost is paid once per epoch).
    """

    def __init__(
        self,
        function: str = "f2",
        n_samples: int = 5000,
        train_fraction: float = 0.8,
        grid_resolution: int = 200,
        batch_size: int | None = None,
        eval_batch_size: int | None = None,
        seed: int = 42,
        num_workers: int = 0,
        steps_per_epoch: int = 1,
    ) -> None:
        self.target = get_function(function)
        n_train, self.n_val = split_sizes(n_samples, train_fraction)
        super().__init__(n_train, batch_size, eval_batch_size, seed, num_workers, steps_per_epoch)
        self.function_name = function
        self.n_samples = n_samples
        self.grid_resolution = grid_resolution
        self.save_hyperparameters()

    def data_spec(self) -> dict[str, int]:
        """What a model needs before training: 2 inputs, 1 output."""
        return {"n_in": 2, "n_out": 1}

    def setup(self, stage: str | None = None) -> None:
        if hasattr(self, "train_set"):
            return
        x = sample_uniform(self.n_samples, 2, self.seed)
        y = evaluate(self.target, x)
        self.train_set = TensorBatchDataset(x[: self.n_train], y[: self.n_train])
        self.val_set = TensorBatchDataset(x[self.n_train :], y[self.n_train :])
        grid = uniform_grid(self.grid_resolution)
        self.test_set = TensorBatchDataset(grid, evaluate(self.target, grid))
