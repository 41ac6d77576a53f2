"""B-spline basis against scipy, finite differences, and the Triton kernel under the interpreter."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys

import numpy as np
import pytest
import torch
from scipy.interpolate import BSpline

from litlab.kernels.bspline import (
    bspline_basis,
    bspline_basis_auto,
    bspline_basis_derivative,
    make_uniform_grid,
)

ORDERS_AND_SIZES = [(k, g) for k in (1, 2, 3) for g in (1, 5, 20)]


def _nonuniform_grid(n_in: int, grid_size: int, k: int, seed: int) -> torch.Tensor:
    """Strictly increasing random knots, one row per feature: (n_in, G + 2k + 1), float64."""
    gen = torch.Generator().manual_seed(seed)
    gaps = 0.2 + torch.rand(n_in, grid_size + 2 * k + 1, generator=gen, dtype=torch.float64)
    return torch.cumsum(gaps, dim=1) - gaps.sum(dim=1, keepdim=True) / 2


def _inputs_over_support(grid: torch.Tensor, n: int, seed: int) -> torch.Tensor:
    """x covering every feature's whole knot span [t_0, t_last): (n, n_in)."""
    gen = torch.Generator().manual_seed(seed)
    u = torch.rand(n, grid.shape[0], generator=gen, dtype=grid.dtype)
    return grid[:, 0] + u * (grid[:, -1] - grid[:, 0])


def _scipy_basis(x: np.ndarray, knots: np.ndarray, k: int, derivative: bool = False) -> np.ndarray:
    """Each basis function from scipy's basis_element (0 outside its support): x (n,) -> (n, G + k)."""
    columns = []
    for m in range(len(knots) - k - 1):
        element = BSpline.basis_element(knots[m : m + k + 2], extrapolate=False)
        if derivative:
            element = element.derivative()
        columns.append(np.nan_to_num(element(x), nan=0.0))
    return np.stack(columns, axis=1)


def test_make_uniform_grid_extends_k_knots_each_side() -> None:
    grid = make_uniform_grid(3, grid_size=4, spline_order=3, lo=-1.0, hi=1.0, dtype=torch.float64)
    assert grid.shape == (3, 4 + 2 * 3 + 1)
    expected = -1.0 + 0.5 * torch.arange(-3, 8, dtype=torch.float64)
    torch.testing.assert_close(grid, expected.expand(3, -1))


@pytest.mark.parametrize(("k", "grid_size"), ORDERS_AND_SIZES)
def test_partition_of_unity_inside_grid(k: int, grid_size: int) -> None:
    grid = make_uniform_grid(4, grid_size, k, lo=-1.0, hi=1.0, dtype=torch.float64)
    x = torch.rand(500, 4, generator=torch.Generator().manual_seed(0), dtype=torch.float64) * 2 - 1
    bases = bspline_basis(x, grid, k)
    assert bases.shape == (500, 4, grid_size + k)
    assert bases.min() >= 0
    torch.testing.assert_close(bases.sum(-1), torch.ones(500, 4, dtype=torch.float64), atol=1e-12, rtol=0)


@pytest.mark.parametrize(("k", "grid_size"), ORDERS_AND_SIZES)
@pytest.mark.parametrize("uniform", [True, False])
def test_basis_and_derivative_match_scipy(k: int, grid_size: int, uniform: bool) -> None:
    if uniform:
        grid = make_uniform_grid(2, grid_size, k, lo=-1.0, hi=1.0, dtype=torch.float64)
    else:
        grid = _nonuniform_grid(2, grid_size, k, seed=grid_size + k)
    x = _inputs_over_support(grid, 400, seed=1)
    bases = bspline_basis(x, grid, k)
    derivatives = bspline_basis_derivative(x, grid, k)
    for i in range(grid.shape[0]):
        knots, xi = grid[i].numpy(), x[:, i].numpy()
        np.testing.assert_allclose(bases[:, i].numpy(), _scipy_basis(xi, knots, k), atol=1e-6, rtol=0)
        expected = _scipy_basis(xi, knots, k, derivative=True)
        np.testing.assert_allclose(derivatives[:, i].numpy(), expected, atol=1e-6, rtol=0)


@pytest.mark.parametrize("k", [1, 2, 3])
def test_derivative_matches_finite_differences_and_autograd(k: int) -> None:
    grid = _nonuniform_grid(3, 6, k, seed=7)
    x = _inputs_over_support(grid, 300, seed=2).requires_grad_()
    derivatives = bspline_basis_derivative(x.detach(), grid, k)

    eps = 1e-6
    central = (bspline_basis(x.detach() + eps, grid, k) - bspline_basis(x.detach() - eps, grid, k)) / (
        2 * eps
    )
    # Away from knots (where B' of order 1 jumps) the central difference is exact to O(eps²).
    gaps = (x.detach().unsqueeze(-1) - grid).abs().min(dim=-1).values
    smooth = (gaps > 10 * eps).unsqueeze(-1).expand_as(derivatives)
    torch.testing.assert_close(derivatives[smooth], central[smooth], atol=1e-6, rtol=0)

    weights = torch.randn(derivatives.shape, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    (autograd,) = torch.autograd.grad((bspline_basis(x, grid, k) * weights).sum(), x)
    torch.testing.assert_close(autograd, (derivatives * weights).sum(-1), atol=1e-10, rtol=0)


def test_order_zero_is_the_interval_indicator() -> None:
    grid = make_uniform_grid(1, 4, 0, dtype=torch.float64)
    x = torch.tensor([[-1.0], [-0.5], [0.2], [0.99]], dtype=torch.float64)
    expected = torch.tensor([[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]], dtype=torch.float64)
    torch.testing.assert_close(bspline_basis(x, grid, 0)[:, 0], expected)
    assert not bspline_basis_derivative(x, grid, 0).any()


def test_auto_uses_torch_on_cpu() -> None:
    grid = make_uniform_grid(3, 5, 3)
    x = torch.rand(10, 3, generator=torch.Generator().manual_seed(0)) * 2 - 1
    torch.testing.assert_close(bspline_basis_auto(x, grid, 3), bspline_basis(x, grid, 3), atol=0, rtol=0)


@pytest.mark.skipif(importlib.util.find_spec("triton") is None, reason="triton is not installed")
def test_triton_kernel_matches_torch_under_interpreter() -> None:
    """TRITON_INTERPRET must be set before triton decorates the kernel, so this runs in a fresh process."""
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    result = subprocess.run([sys.executable, __file__], env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr


def _check_triton_against_torch() -> None:
    """Triton vs torch: values, derivative basis, first and second x-gradients, in float32 and float64."""
    from litlab.kernels.bspline_triton import bspline_basis_derivative_triton, bspline_basis_triton

    cases = [(k, g, uniform) for k in (0, 1, 2, 3) for g in (5, 20) for uniform in (True, False)]
    for k, grid_size, uniform in cases:
        for dtype, tol in ((torch.float32, 1e-5), (torch.float64, 1e-12)):
            if uniform:
                grid = make_uniform_grid(3, grid_size, k, dtype=dtype)
            else:
                grid = _nonuniform_grid(3, grid_size, k, seed=k + grid_size).to(dtype)
            x = _inputs_over_support(grid, 37, seed=k).requires_grad_()
            label = f"k={k} G={grid_size} uniform={uniform} {dtype}"

            triton_bases = bspline_basis_triton(x, grid, k)
            torch.testing.assert_close(triton_bases, bspline_basis(x, grid, k), atol=tol, rtol=0, msg=label)
            torch.testing.assert_close(
                bspline_basis_derivative_triton(x.detach(), grid, k),
                bspline_basis_derivative(x.detach(), grid, k),
                atol=tol * grid_size,
                rtol=0,
                msg=label,
            )
            if k == 0:
                continue
            weights = torch.randn(triton_bases.shape, generator=torch.Generator().manual_seed(0), dtype=dtype)
            gradients = []
            for basis_fn in (bspline_basis_triton, bspline_basis):
                (grad,) = torch.autograd.grad((basis_fn(x, grid, k) * weights).sum(), x, create_graph=True)
                # Order-1 B' is piecewise constant (built from indicators): it has no graph to differentiate.
                second = torch.autograd.grad(grad.square().sum(), x)[0] if k >= 2 else None
                gradients.append((grad.detach(), second))
            (g_triton, s_triton), (g_torch, s_torch) = gradients
            torch.testing.assert_close(g_triton, g_torch, atol=tol * grid_size, rtol=tol, msg=label)
            if k >= 2:
                torch.testing.assert_close(s_triton, s_torch, atol=tol * grid_size**3, rtol=tol, msg=label)

            # Without create_graph the backward goes through the Triton derivative kernel instead.
            (plain,) = torch.autograd.grad((bspline_basis_triton(x, grid, k) * weights).sum(), x)
            torch.testing.assert_close(plain, g_torch, atol=tol * grid_size, rtol=tol, msg=label)


if __name__ == "__main__":
    if os.environ.get("TRITON_INTERPRET") != "1":
        sys.exit("run with TRITON_INTERPRET=1")
    _check_triton_against_torch()
