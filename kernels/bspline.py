"""B-spline bases for spline KANs: vectorised Cox–de Boor in pure torch, and a dispatcher to Triton.

Conventions (shared with efficient-kan, pykan and jaxKAN): each input feature has its own knot vector of
``G + 2k + 1`` knots, ``G`` intervals over ``[lo, hi]`` extended by ``k`` knots on each side; the order-0
indicators are half-open ``[t_c, t_{c+1})`` and the order-``k`` basis has ``G + k`` functions.
"""

from __future__ import annotations

import functools
import importlib.util

import torch
from torch import Tensor


def make_uniform_grid(
    n_in: int,
    grid_size: int,
    spline_order: int = 3,
    lo: float = -1.0,
    hi: float = 1.0,
    dtype: torch.dtype | None = None,
    device: torch.device | str | None = None,
) -> Tensor:
    """Uniform knots ``lo + h*(-k, ..., G + k)`` with ``h = (hi - lo) / G``, one row per input feature.

    Returns: (n_in, G + 2k + 1).
    """
    if grid_size < 1 or spline_order < 0 or not hi > lo:
        raise ValueError(
            f"need grid_size >= 1, spline_order >= 0, hi > lo; got {grid_size}, {spline_order}, {lo}, {hi}"
        )
    h = (hi - lo) / grid_size
    steps = torch.arange(-spline_order, grid_size + spline_order + 1, dtype=dtype, device=device)
    return (lo + h * steps).expand(n_in, -1).contiguous()


def _safe_span(span: Tensor) -> Tensor:
    """Replace zero knot spans by 1: the matching lower-order basis is 0 there (Cox–de Boor's 0/0 = 0)."""
    return torch.where(span == 0, torch.ones_like(span), span)


def _cox_de_boor(x: Tensor, grid: Tensor, order: int) -> Tensor:
    """All B-splines of the given order at x.

    x: (batch, n_in), grid: (n_in, n_knots) -> (batch, n_in, n_knots - 1 - order).
    """
    x = x.unsqueeze(-1)
    bases = ((x >= grid[:, :-1]) & (x < grid[:, 1:])).to(x.dtype)
    for d in range(1, order + 1):
        left = (x - grid[:, : -(d + 1)]) / _safe_span(grid[:, d:-1] - grid[:, : -(d + 1)])
        right = (grid[:, d + 1 :] - x) / _safe_span(grid[:, d + 1 :] - grid[:, 1:-d])
        bases = left * bases[..., :-1] + right * bases[..., 1:]
    return bases


def bspline_basis(x: Tensor, grid: Tensor, k: int = 3) -> Tensor:
    """B-spline basis of order k (degree k) at x, differentiable in x by autograd.

    x: (batch, n_in), grid: (n_in, G + 2k + 1) -> (batch, n_in, G + k).
    """
    return _cox_de_boor(x, grid, k)


def bspline_basis_derivative(x: Tensor, grid: Tensor, k: int = 3) -> Tensor:
    """d/dx of each basis function from the order k-1 basis (exact, no autograd):
    B'_c = k (B_c/(t_{c+k} - t_c) - B_{c+1}/(t_{c+k+1} - t_{c+1})).

    x: (batch, n_in), grid: (n_in, G + 2k + 1) -> (batch, n_in, G + k).
    """
    if k == 0:
        return x.new_zeros(*x.shape, grid.shape[-1] - 1)
    lower = _cox_de_boor(x, grid, k - 1)
    left = lower[..., :-1] / _safe_span(grid[:, k:-1] - grid[:, : -(k + 1)])
    right = lower[..., 1:] / _safe_span(grid[:, k + 1 :] - grid[:, 1:-k])
    return k * (left - right)


@functools.cache
def triton_available() -> bool:
    """Whether triton can be imported (checked once, without importing it)."""
    return importlib.util.find_spec("triton") is not None


def bspline_basis_auto(x: Tensor, grid: Tensor, k: int = 3) -> Tensor:
    """``bspline_basis`` through the Triton kernel when x is on CUDA and triton is installed, else torch.

    x: (batch, n_in), grid: (n_in, G + 2k + 1) -> (batch, n_in, G + k).
    """
    if x.is_cuda and triton_available():
        from litlab.kernels.bspline_triton import bspline_basis_triton

        return bspline_basis_triton(x, grid, k)
    return bspline_basis(x, grid, k)
