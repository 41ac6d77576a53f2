"""Second moments of the KAN layer's functions under the reference input U(-1, 1), by seeded Monte Carlo.

As in the official code (jaxKAN ``lecun``/``glorot`` initialisers): one sample of 10^4 draws,
μ_B = mean over draws and over all ``G + k`` basis functions of B_m(x)², μ_B′ likewise with B_m′(x)²,
μ_R = mean SiLU(x)², μ_R′ = mean SiLU′(x)². B′ is the analytic derivative, SiLU′ comes from autograd.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch

from litlab.kernels.bspline import bspline_basis, bspline_basis_derivative, make_uniform_grid

N_SAMPLES = 10_000


@dataclass(frozen=True)
class KANMoments:
    """E[B²], E[B′²] (averaged over basis index m) and E[SiLU²], E[SiLU′²] for x ~ U(-1, 1)."""

    mu_b: float
    mu_b_prime: float
    mu_r: float
    mu_r_prime: float


def _reference_sample(n_samples: int, seed: int) -> torch.Tensor:
    """Seeded draws from U(-1, 1) in float64, shape (n_samples,)."""
    generator = torch.Generator().manual_seed(seed)
    return torch.rand(n_samples, generator=generator, dtype=torch.float64) * 2 - 1


@functools.cache
def spline_moments(
    grid_size: int, spline_order: int = 3, n_samples: int = N_SAMPLES, seed: int = 0
) -> tuple[float, float]:
    """(μ_B, μ_B′) on the uniform grid over [-1, 1] with ``grid_size`` intervals; cached per arguments."""
    x = _reference_sample(n_samples, seed)[:, None]
    grid = make_uniform_grid(1, grid_size, spline_order, dtype=torch.float64)
    mu_b = bspline_basis(x, grid, spline_order).square().mean().item()
    mu_b_prime = bspline_basis_derivative(x, grid, spline_order).square().mean().item()
    return mu_b, mu_b_prime


@functools.cache
def residual_moments(n_samples: int = N_SAMPLES, seed: int = 0) -> tuple[float, float]:
    """(μ_R, μ_R′) of the SiLU residual branch; cached per arguments."""
    x = _reference_sample(n_samples, seed).requires_grad_()
    with torch.enable_grad():  # callers often initialise weights under no_grad
        silu = torch.nn.functional.silu(x)
        (silu_prime,) = torch.autograd.grad(silu.sum(), x)
    return silu.detach().square().mean().item(), silu_prime.square().mean().item()


def kan_moments(
    grid_size: int, spline_order: int = 3, n_samples: int = N_SAMPLES, seed: int = 0
) -> KANMoments:
    """All four moments for a layer with ``grid_size`` intervals and splines of order ``spline_order``."""
    mu_b, mu_b_prime = spline_moments(grid_size, spline_order, n_samples, seed)
    mu_r, mu_r_prime = residual_moments(n_samples, seed)
    return KANMoments(mu_b=mu_b, mu_b_prime=mu_b_prime, mu_r=mu_r, mu_r_prime=mu_r_prime)
