"""Forward PDE problems of the KAN initialisation study, their reference solutions, data and RBA weights.

Forms follow ``src/pdes.py`` and ``src/utils.py`` of srigas/KAN_Initialization_Schemes, including the
input order (column 0 is t for the evolution problems):

- ``allen_cahn``, points (t, x) in [0, 1] x [-1, 1]: r = u_t - D u_xx - c (u - u^3), D = 1e-4, c = 5;
  u(0, x) = x^2 cos(pi x), u(t, -1) = u(t, 1) = -1.
- ``burgers``, (t, x) in [0, 1] x [-1, 1]: r = u_t + u u_x - nu u_xx, nu = 0.01 / pi;
  u(0, x) = -sin(pi x), u(t, -1) = u(t, 1) = 0.
- ``helmholtz``, (x, y) in [-1, 1]^2: r = u_xx + u_yy + k^2 u - q with
  q = (k^2 - pi^2 (a1^2 + a2^2)) sin(a1 pi x) sin(a2 pi y), a1 = 1, a2 = 4, k = 1; u = 0 on the boundary;
  exact solution u = sin(a1 pi x) sin(a2 pi y).

Collocation points are the n x n tensor grid of the closed domain (n = 64 by default, boundary lines
included, as in the official ``get_collocs``) or, with ``sampling="random"``, n^2 seeded uniform points.
Condition points: n per segment; for evolution problems [initial line t = 0, x = -1, x = 1] in that order,
for Helmholtz the four sides x = -1, x = 1, y = -1, y = 1.

Training batch (a dict, one per step; full batch by default):

- ``collocation``        (B, 2)  residual points, a (shard of the) collocation set
- ``collocation_index``  (B,)    their indices in the full set, to index per-point RBA weights
- ``boundary_x``         (M, 2)  all initial/boundary-condition points
- ``boundary_u``         (M, 1)  their target values
- ``boundary_index``     (M,)    0..M-1

Validation and test batches are ``(points (B, 2), u_ref (B, 1))`` on the reference grid, for relative L2.
Reference solutions are analytic (Helmholtz) or computed by a sine-pseudo-spectral ETDRK4 solver (Allen-Cahn,
Burgers; the Burgers one is checked against the Cole-Hopf solution) and cached as ``.npz`` under
``$LITLAB_CACHE`` (default ``~/.cache/litlab``) in ``pde/``, keyed by every parameter.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import zipfile
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch
from scipy import fft
from torch import nn
from torch.utils.data import Dataset

from litlab.core import paths
from litlab.core.cache import write_npz_atomic
from litlab.datamodules.base import RegressionDataModule, TensorBatchDataset

Sampling = Literal["grid", "random"]
UFunction = Callable[[torch.Tensor], torch.Tensor]
SOLVER_VERSION = 1


# ----------------------------------------------------------------------------------------------------------
# Residual-based attention (RBA) weights
# ----------------------------------------------------------------------------------------------------------


def rba_update(
    weights: torch.Tensor, residual: torch.Tensor, gamma: float = 0.999, eta: float = 0.01
) -> torch.Tensor:
    """One RBA step per point: lambda <- gamma * lambda + eta * |r| / max|r| (shapes of ``residual``).

    As in the official loss, gradients flow through ``residual`` into the new weights; an all-zero
    residual leaves ``gamma * lambda`` (the official code would divide 0 by 0).
    """
    magnitude = residual.abs()
    return gamma * weights + eta * magnitude / magnitude.max().clamp_min(torch.finfo(magnitude.dtype).tiny)


class ResidualAttention(nn.Module):
    """Per-point RBA weights kept in a (checkpointed) buffer, initialised to 1, for one set of points.

    ``weights = rba(residual, index)`` returns the updated weights for the given points (differentiable,
    as the official code) and, in training mode, stores them detached. The official loss is
    ``mean((weights * residual)**2)``, with one holder for the collocation and one for the condition points.
    Call it once per training step. Under DDP each rank updates the points of its shard: set
    ``broadcast_buffers=False`` so rank 0 does not overwrite them (and max|r| is then taken per shard).
    """

    weights: torch.Tensor

    def __init__(self, n_points: int, gamma: float = 0.999, eta: float = 0.01) -> None:
        super().__init__()
        self.gamma, self.eta = gamma, eta
        self.register_buffer("weights", torch.ones(n_points, 1))

    def forward(self, residual: torch.Tensor, index: torch.Tensor | None = None) -> torch.Tensor:
        old = self.weights if index is None else self.weights[index]
        new = rba_update(old, residual, self.gamma, self.eta)
        if self.training:
            with torch.no_grad():
                if index is None:
                    self.weights.copy_(new)
                else:
                    self.weights[index] = new.detach()
        return new


# ----------------------------------------------------------------------------------------------------------
# Reference solvers
# ----------------------------------------------------------------------------------------------------------


def etdrk4_coefficients(lam: np.ndarray, h: float, n_contour: int = 32) -> tuple[np.ndarray, ...]:
    """ETDRK4 (Cox-Matthews) coefficients for diagonal linear part ``lam`` and step ``h``.

    The phi-functions are averaged over a complex contour (Kassam & Trefethen 2005) to avoid cancellation.
    """
    roots = np.exp(1j * np.pi * (np.arange(1, n_contour + 1) - 0.5) / n_contour)
    lr = h * lam[:, None] + roots[None, :]
    exp_lr = np.exp(lr)

    def mean(values: np.ndarray) -> np.ndarray:
        return h * np.real(values.mean(axis=1))

    q = mean((np.exp(lr / 2) - 1) / lr)
    f1 = mean((-4 - lr + exp_lr * (4 - 3 * lr + lr**2)) / lr**3)
    f2 = mean((2 + lr + exp_lr * (lr - 2)) / lr**3)
    f3 = mean((-4 - 3 * lr - lr**2 + exp_lr * (4 - lr)) / lr**3)
    return np.exp(h * lam), np.exp(h * lam / 2), q, f1, f2, f3


def solve_dirichlet_1d(
    initial: Callable[[np.ndarray], np.ndarray],
    boundary_value: float,
    diffusion: float,
    nonlinear: Callable[[np.ndarray, np.ndarray], np.ndarray],
    times: np.ndarray,
    x_out: np.ndarray,
    n_modes: int = 1023,
    dt: float = 1e-3,
) -> np.ndarray:
    """Solve u_t = diffusion u_xx + nonlinear(u, u_x) on x in [-1, 1], u(t, +-1) = boundary_value.

    Sine pseudo-spectral in x (v = u - boundary_value has n_modes sine modes, transforms by DST-I/DCT-I;
    n_modes + 1 a power of two is fastest), ETDRK4 in time with a step <= dt that lands on every
    uniformly spaced output time. Returns u at ``times x x_out``, evaluated from the sine series.
    """
    k = np.arange(1, n_modes + 1)
    wavenumber = k * np.pi / 2
    norm = math.sqrt(2 / (n_modes + 1))
    x_nodes = -1 + 2 * k / (n_modes + 1)
    padded = np.zeros(n_modes + 2)

    def rhs(coef: np.ndarray) -> np.ndarray:
        u = fft.idst(coef, type=1, norm="ortho") + boundary_value
        padded[1:-1] = coef * norm * wavenumber
        u_x = fft.dct(padded, type=1)[1:-1] / 2
        return fft.dst(nonlinear(u, u_x), type=1, norm="ortho")

    spacing = np.diff(times)
    if len(times) < 2 or times[0] != 0 or not np.allclose(spacing, spacing[0]):
        raise ValueError("times must be uniformly spaced and start at 0")
    substeps = math.ceil(spacing[0] / dt - 1e-9)
    e, e2, q, f1, f2, f3 = etdrk4_coefficients(-diffusion * wavenumber**2, spacing[0] / substeps)
    basis = norm * np.sin(np.outer(x_out + 1, wavenumber))
    coef = fft.dst(initial(x_nodes) - boundary_value, type=1, norm="ortho")
    out = np.empty((len(times), len(x_out)))
    out[0] = basis @ coef + boundary_value
    for i in range(1, len(times)):
        for _ in range(substeps):
            n_v = rhs(coef)
            a = e2 * coef + q * n_v
            n_a = rhs(a)
            b = e2 * coef + q * n_a
            n_b = rhs(b)
            c = e2 * a + q * (2 * n_b - n_v)
            coef = e * coef + f1 * n_v + 2 * f2 * (n_a + n_b) + f3 * rhs(c)
        out[i] = basis @ coef + boundary_value
    return out


def burgers_cole_hopf(
    times: np.ndarray, x: np.ndarray, nu: float, step: float = 0.025, half_width: float = 20.0
) -> np.ndarray:
    """Exact Burgers solution for u(0, x) = -sin(pi x) by the Cole-Hopf transform, shape (len(times), len(x)).

    u = -int sin(pi (x - e)) f(x - e) G(e) de / int f(x - e) G(e) de with f(y) = exp(-cos(pi y) / (2 pi nu)),
    G the heat kernel; with e = sqrt(4 nu t) z both integrals are Gauss-Hermite integrals in z, evaluated
    by the trapezoid rule on [-half_width, half_width] (spectrally accurate for these smooth,
    Gaussian-decaying integrands; the exponentially large factors are handled in log space).
    """
    z = np.arange(-half_width, half_width + step / 2, step)
    out = np.empty((len(times), len(x)))
    for i, t in enumerate(times):
        if t == 0:
            out[i] = -np.sin(np.pi * x)
            continue
        y = x[:, None] - math.sqrt(4 * nu * t) * z[None, :]
        log_weight = -np.cos(np.pi * y) / (2 * np.pi * nu) - z[None, :] ** 2
        weight = np.exp(log_weight - log_weight.max(axis=1, keepdims=True))
        out[i] = -(np.sin(np.pi * y) * weight).sum(axis=1) / weight.sum(axis=1)
    return out


def cache_root(cache_dir: str | os.PathLike | None = None) -> Path:
    """The folder for cached references: ``cache_dir``, else ``$LITLAB_CACHE``, else ``~/.cache/litlab``."""
    return (Path(cache_dir).expanduser() if cache_dir else paths.cache_root()) / "pde"


def cached_arrays(
    name: str, key: dict[str, Any], compute: Callable[[], dict[str, np.ndarray]], cache_dir: str | None
) -> dict[str, np.ndarray]:
    """``compute()`` once per distinct ``key``, stored as ``<cache>/pde/<name>-<hash>.npz`` (atomic write)."""
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]
    path = cache_root(cache_dir) / f"{name}-{digest}.npz"
    if path.is_file():
        try:
            with np.load(path) as stored:
                return {k: stored[k] for k in stored.files}
        except (OSError, ValueError, zipfile.BadZipFile):
            path.unlink(missing_ok=True)  # a corrupt cache entry is recomputed
    arrays = compute()
    write_npz_atomic(path, arrays, compressed=False)
    return arrays


# ----------------------------------------------------------------------------------------------------------
# Problems
# ----------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ReferenceSolution:
    """u on the tensor grid ``axes[0] x axes[1]`` (``u[i, j]`` at ``(axes[0][i], axes[1][j])``)."""

    axes: tuple[np.ndarray, np.ndarray]
    u: np.ndarray

    def points(self) -> torch.Tensor:
        """``(M, 2)`` float32 grid points, first axis slowest (``meshgrid`` 'ij', as the official get_ref)."""
        return _tensor_grid(torch.from_numpy(self.axes[0]), torch.from_numpy(self.axes[1]))

    def values(self) -> torch.Tensor:
        """``(M, 1)`` float32 reference values in the order of ``points()``."""
        return torch.from_numpy(self.u).float().reshape(-1, 1)


def _tensor_grid(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    first, second = torch.meshgrid(a.double(), b.double(), indexing="ij")
    return torch.stack([first.reshape(-1), second.reshape(-1)], dim=1).float()


def gradient(output: torch.Tensor, points: torch.Tensor) -> torch.Tensor:
    """d output / d points, ``(N, 2)``, keeping the graph (``output`` row i depends on ``points`` row i)."""
    return torch.autograd.grad(output, points, torch.ones_like(output), create_graph=True)[0]


class PDEProblem(ABC):
    """A 2-D forward problem: domain, residual, condition points and a reference solution."""

    name: str
    coordinates: tuple[str, str]
    bounds: tuple[tuple[float, float], tuple[float, float]]
    reference_shape: tuple[int, int]
    n_segments: int  # condition segments, each with n_per_segment points

    def collocation_points(self, n_per_side: int, sampling: Sampling = "grid", seed: int = 0) -> torch.Tensor:
        """``(n_per_side**2, 2)`` residual points: the closed tensor grid, or seeded uniform points."""
        (lo0, hi0), (lo1, hi1) = self.bounds
        if sampling == "grid":
            axis0, axis1 = (torch.linspace(lo, hi, n_per_side, dtype=torch.float64) for lo, hi in self.bounds)
            return _tensor_grid(axis0, axis1)
        if sampling == "random":
            unit = np.random.default_rng(seed).uniform(size=(n_per_side**2, 2))
            return torch.from_numpy(np.array([lo0, lo1]) + unit * np.array([hi0 - lo0, hi1 - lo1])).float()
        raise ValueError(f"sampling must be 'grid' or 'random', got {sampling!r}")

    def _segment(
        self, fixed_axis: int, value: float, n: int, sampling: Sampling, rng: np.random.Generator
    ) -> np.ndarray:
        lo, hi = self.bounds[1 - fixed_axis]
        free = np.linspace(lo, hi, n) if sampling == "grid" else rng.uniform(lo, hi, n)
        points = np.empty((n, 2))
        points[:, fixed_axis], points[:, 1 - fixed_axis] = value, free
        return points

    def residual(self, u_fn: UFunction, points: torch.Tensor) -> torch.Tensor:
        """The PDE residual ``(N, 1)`` of ``u_fn: (N, 2) -> (N, 1)`` at ``points`` (treated as data).

        Built with autograd and ``create_graph=True``, so it can be trained; works under ``no_grad`` too
        (not under ``inference_mode``: use ``Trainer(inference_mode=False)`` to log residuals in eval).
        """
        with torch.enable_grad():
            p = points.detach().requires_grad_(True)
            return self._residual(u_fn(p), p)

    @abstractmethod
    def _residual(self, u: torch.Tensor, points: torch.Tensor) -> torch.Tensor:
        """The residual from ``u = u_fn(points)`` with ``points`` requiring grad."""

    @abstractmethod
    def boundary_data(
        self, n_per_segment: int, sampling: Sampling = "grid", seed: int = 0
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Initial/boundary-condition points ``(M, 2)`` and targets ``(M, 1)``, float32."""

    @abstractmethod
    def reference_solution(
        self, shape: tuple[int, int] | None = None, cache_dir: str | None = None
    ) -> ReferenceSolution:
        """u on a uniform ``shape`` grid of the domain (default ``reference_shape``)."""


class EvolutionProblem(PDEProblem):
    """u(t, x) on [0, 1] x [-1, 1] with u_t = diffusion u_xx + nonlinear(u, u_x), u(t, +-1) constant."""

    coordinates = ("t", "x")
    bounds = ((0.0, 1.0), (-1.0, 1.0))
    reference_shape = (201, 512)
    n_segments = 3
    boundary_value: float
    diffusion: float

    def __init__(self, n_modes: int = 1023, dt: float = 1e-3) -> None:
        self.n_modes, self.dt = n_modes, dt

    @abstractmethod
    def initial(self, x: np.ndarray) -> np.ndarray:
        """u(0, x)."""

    @abstractmethod
    def nonlinear(self, u: np.ndarray, u_x: np.ndarray) -> np.ndarray:
        """The non-diffusive part of u_t, in numpy, for the reference solver."""

    def boundary_data(
        self, n_per_segment: int, sampling: Sampling = "grid", seed: int = 0
    ) -> tuple[torch.Tensor, torch.Tensor]:
        rng = np.random.default_rng(seed)
        initial = self._segment(0, 0.0, n_per_segment, sampling, rng)
        sides = [self._segment(1, x, n_per_segment, sampling, rng) for x in (-1.0, 1.0)]
        targets = [self.initial(initial[:, 1]), np.full(2 * n_per_segment, self.boundary_value)]
        points = np.concatenate([initial, *sides])
        return torch.from_numpy(points).float(), torch.from_numpy(np.concatenate(targets)).float()[:, None]

    def _parameters(self) -> dict[str, float]:
        return {"diffusion": self.diffusion}

    def reference_solution(
        self, shape: tuple[int, int] | None = None, cache_dir: str | None = None
    ) -> ReferenceSolution:
        n_t, n_x = shape or self.reference_shape
        times, x = np.linspace(0.0, 1.0, n_t), np.linspace(-1.0, 1.0, n_x)
        key = {
            "problem": self.name,
            **self._parameters(),
            "shape": [n_t, n_x],
            "n_modes": self.n_modes,
            "dt": self.dt,
            "version": SOLVER_VERSION,
        }

        def compute() -> dict[str, np.ndarray]:
            u = solve_dirichlet_1d(
                self.initial,
                self.boundary_value,
                self.diffusion,
                self.nonlinear,
                times,
                x,
                self.n_modes,
                self.dt,
            )
            return {"t": times, "x": x, "u": u}

        arrays = cached_arrays(self.name, key, compute, cache_dir)
        return ReferenceSolution((arrays["t"], arrays["x"]), arrays["u"])


class AllenCahn(EvolutionProblem):
    """Allen-Cahn: u_t = D u_xx + c (u - u^3), u(0, x) = x^2 cos(pi x), u(t, +-1) = -1 (official form)."""

    name = "allen_cahn"
    boundary_value = -1.0

    def __init__(self, D: float = 1e-4, c: float = 5.0, n_modes: int = 1023, dt: float = 1e-3) -> None:
        super().__init__(n_modes, dt)
        self.diffusion, self.c = D, c

    def _parameters(self) -> dict[str, float]:
        return {"diffusion": self.diffusion, "c": self.c}

    def initial(self, x: np.ndarray) -> np.ndarray:
        return x**2 * np.cos(np.pi * x)

    def nonlinear(self, u: np.ndarray, u_x: np.ndarray) -> np.ndarray:
        return self.c * (u - u**3)

    def _residual(self, u: torch.Tensor, points: torch.Tensor) -> torch.Tensor:
        du = gradient(u, points)
        u_xx = gradient(du[:, 1:], points)[:, 1:]
        return du[:, :1] - self.diffusion * u_xx - self.c * (u - u**3)


class Burgers(EvolutionProblem):
    """Viscous Burgers: u_t + u u_x = nu u_xx, u(0, x) = -sin(pi x), u(t, +-1) = 0."""

    name = "burgers"
    boundary_value = 0.0

    def __init__(self, nu: float = 0.01 / math.pi, n_modes: int = 1023, dt: float = 1e-3) -> None:
        super().__init__(n_modes, dt)
        self.diffusion = nu

    def initial(self, x: np.ndarray) -> np.ndarray:
        return -np.sin(np.pi * x)

    def nonlinear(self, u: np.ndarray, u_x: np.ndarray) -> np.ndarray:
        return -u * u_x

    def _residual(self, u: torch.Tensor, points: torch.Tensor) -> torch.Tensor:
        du = gradient(u, points)
        u_xx = gradient(du[:, 1:], points)[:, 1:]
        return du[:, :1] + u * du[:, 1:] - self.diffusion * u_xx


class Helmholtz(PDEProblem):
    """Helmholtz u_xx + u_yy + k^2 u = q on [-1, 1]^2, u = 0 on the boundary: u = sin(a1 pi x) sin(a2 pi y)"""

    name = "helmholtz"
    coordinates = ("x", "y")
    bounds = ((-1.0, 1.0), (-1.0, 1.0))
    reference_shape = (512, 512)
    n_segments = 4

    def __init__(self, a1: float = 1.0, a2: float = 4.0, k: float = 1.0) -> None:
        self.a1, self.a2, self.k = a1, a2, k

    def exact(self, points: torch.Tensor) -> torch.Tensor:
        """The analytic solution at ``points: (N, 2)``, ``(N, 1)``."""
        return torch.sin(self.a1 * math.pi * points[:, :1]) * torch.sin(self.a2 * math.pi * points[:, 1:])

    def _residual(self, u: torch.Tensor, points: torch.Tensor) -> torch.Tensor:
        du = gradient(u, points)
        laplacian = gradient(du[:, :1], points)[:, :1] + gradient(du[:, 1:], points)[:, 1:]
        source = (self.k**2 - math.pi**2 * (self.a1**2 + self.a2**2)) * self.exact(points)
        return laplacian + self.k**2 * u - source

    def boundary_data(
        self, n_per_segment: int, sampling: Sampling = "grid", seed: int = 0
    ) -> tuple[torch.Tensor, torch.Tensor]:
        rng = np.random.default_rng(seed)
        sides = [self._segment(axis, v, n_per_segment, sampling, rng) for axis in (0, 1) for v in (-1.0, 1.0)]
        points = torch.from_numpy(np.concatenate(sides)).float()
        return points, torch.zeros(len(points), 1)

    def reference_solution(
        self, shape: tuple[int, int] | None = None, cache_dir: str | None = None
    ) -> ReferenceSolution:
        n_x, n_y = shape or self.reference_shape
        x, y = np.linspace(-1.0, 1.0, n_x), np.linspace(-1.0, 1.0, n_y)
        u = np.outer(np.sin(self.a1 * np.pi * x), np.sin(self.a2 * np.pi * y))
        return ReferenceSolution((x, y), u)


PROBLEMS: dict[str, type[PDEProblem]] = {"allen_cahn": AllenCahn, "burgers": Burgers, "helmholtz": Helmholtz}


def make_problem(name: str, **params: float) -> PDEProblem:
    """The problem ``name`` (``allen_cahn`` or ``allen-cahn``, ``burgers``, ``helmholtz``) with ``params``."""
    key = name.replace("-", "_").lower()
    if key not in PROBLEMS:
        raise ValueError(f"unknown PDE problem {name!r}; choose one of {', '.join(PROBLEMS)}")
    return PROBLEMS[key](**params)


# ----------------------------------------------------------------------------------------------------------
# Data
# ----------------------------------------------------------------------------------------------------------


class CollocationDataset(Dataset):
    """Collocation points indexed one by one; every fetched batch also carries all condition points."""

    def __init__(self, collocation: torch.Tensor, boundary_x: torch.Tensor, boundary_u: torch.Tensor) -> None:
        self.collocation, self.boundary_x, self.boundary_u = collocation, boundary_x, boundary_u
        self.boundary_index = torch.arange(len(boundary_x))

    def __len__(self) -> int:
        return len(self.collocation)

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        return self.__getitems__([index])

    def __getitems__(self, indices: Sequence[int]) -> dict[str, torch.Tensor]:
        index = torch.as_tensor(indices, dtype=torch.long)
        return {
            "collocation": self.collocation[index],
            "collocation_index": index,
            "boundary_x": self.boundary_x,
            "boundary_u": self.boundary_u,
            "boundary_index": self.boundary_index,
        }


class PDEDataModule(RegressionDataModule):
    """Collocation and condition points of one PDE problem, with its reference grid as val/test set.

    Args:
        problem: ``allen_cahn``, ``burgers`` or ``helmholtz``; ``problem_params`` overrides its
            coefficients or solver settings (e.g. ``{nu: 0.01}``, ``{n_modes: 2047}``).
        n_collocation: points per side of the collocation grid (paper: 64, i.e. 4096 points).
        n_boundary: points per condition segment (default: ``n_collocation``, as in the paper).
        sampling: ``grid`` (paper) or seeded ``random`` uniform points.
        batch_size: global number of collocation points per step; ``None`` is full batch (the paper).
            Every batch carries all condition points.
        reference_shape: grid of the reference solution ((n_t, n_x) or (n_x, n_y)); default as shipped
            with the official code (201 x 512, Helmholtz 512 x 512).
        cache_dir: where reference solutions are cached (default ``$LITLAB_CACHE`` or ``~/.cache/litlab``).
        steps_per_epoch: full batch only: identical full-batch steps per trainer epoch.
    """

    def __init__(
        self,
        problem: str = "helmholtz",
        n_collocation: int = 64,
        n_boundary: int | None = None,
        sampling: Sampling = "grid",
        batch_size: int | None = None,
        eval_batch_size: int | None = None,
        seed: int = 42,
        reference_shape: tuple[int, int] | None = None,
        cache_dir: str | None = None,
        problem_params: dict[str, float] | None = None,
        num_workers: int = 0,
        steps_per_epoch: int = 1,
    ) -> None:
        if sampling not in ("grid", "random"):
            raise ValueError(f"sampling must be 'grid' or 'random', got {sampling!r}")
        self.problem = make_problem(problem, **(problem_params or {}))
        super().__init__(n_collocation**2, batch_size, eval_batch_size, seed, num_workers, steps_per_epoch)
        self.n_collocation = n_collocation
        self.n_boundary = n_boundary or n_collocation
        self.sampling = sampling
        self.reference_shape = tuple(reference_shape) if reference_shape else None
        self.cache_dir = cache_dir
        self.save_hyperparameters()

    @property
    def n_collocation_points(self) -> int:
        """Size of the collocation set (the RBA buffer for residuals)."""
        return self.n_collocation**2

    @property
    def n_boundary_points(self) -> int:
        """Size of the condition set (the RBA buffer for condition residuals)."""
        return self.problem.n_segments * self.n_boundary

    def prepare_data(self) -> None:
        self.problem.reference_solution(self.reference_shape, self.cache_dir)

    def _reference(self) -> ReferenceSolution:
        """The reference solution, loaded (or computed and cached) once per data module."""
        if not hasattr(self, "reference"):
            self.reference = self.problem.reference_solution(self.reference_shape, self.cache_dir)
        return self.reference

    def data_spec(self) -> dict[str, Any]:
        """What a PINN needs before training: widths (t, x) or (x, y) -> u, the problem, the sizes of its
        RBA weight sets and the reference solution (computed here if not cached, then reused by setup)."""
        return {
            "n_in": 2,
            "n_out": 1,
            "problem": self.problem,
            "n_collocation_points": self.n_collocation_points,
            "n_boundary_points": self.n_boundary_points,
            "reference": self._reference(),
        }

    def setup(self, stage: str | None = None) -> None:
        if hasattr(self, "train_set"):
            return
        collocation = self.problem.collocation_points(self.n_collocation, self.sampling, self.seed)
        boundary_x, boundary_u = self.problem.boundary_data(self.n_boundary, self.sampling, self.seed + 1)
        self.train_set = CollocationDataset(collocation, boundary_x, boundary_u)
        self._reference()
        self.val_set = self.test_set = TensorBatchDataset(self.reference.points(), self.reference.values())
