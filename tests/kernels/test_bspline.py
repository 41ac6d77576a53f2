"""B-spline basis against scipy, finite differences, and the Triton kernel under the interpreter; the
closed-form uniform basis against Cox–de Boor (values and derivatives of every order, torch.func)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from collections.abc import Callable

import numpy as np
import pytest
import torch
from scipy.interpolate import BSpline

from litlab.kernels.bspline import (
    bspline_basis,
    bspline_basis_auto,
    bspline_basis_derivative,
    bspline_basis_fast,
    bspline_basis_uniform,
    make_uniform_grid,
    uniform_knot_map,
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


def _uniform_case(
    n_in: int, grid_size: int, k: int
) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
    """A float64 uniform grid over [-1, 1] and its knot map."""
    grid = make_uniform_grid(n_in, grid_size, k, dtype=torch.float64)
    knot_map = uniform_knot_map(grid)
    assert knot_map is not None
    return grid, knot_map


def _inputs_away_from_knots(grid: torch.Tensor, n: int, seed: int, gap: float = 1e-3) -> torch.Tensor:
    """x over [t_0 - 2h, t_last + 2h) (beyond the support too), nudged to keep ``gap`` from every knot."""
    h = grid[:, 1] - grid[:, 0]
    gen = torch.Generator().manual_seed(seed)
    u = torch.rand(n, grid.shape[0], generator=gen, dtype=grid.dtype)
    x = grid[:, 0] - 2 * h + u * (grid[:, -1] - grid[:, 0] + 4 * h)
    position = (x - grid[:, 0]) / h
    near = (position - position.round()).abs() * h < gap
    return torch.where(near, x + 3 * gap, x)


@pytest.mark.parametrize(
    ("grid_size", "k", "lo", "hi", "dtype"),
    [(5, 3, -1.0, 1.0, torch.float32), (20, 3, -1.0, 1.0, torch.float64), (7, 2, -3.3, 7.1, torch.float32),
     (200, 1, 0.1, 0.3, torch.float64), (1000, 3, -100.0, 100.0, torch.float32)],
)  # fmt: skip
def test_uniform_knot_map_gives_the_span_coordinate(
    grid_size: int, k: int, lo: float, hi: float, dtype: torch.dtype
) -> None:
    grid = make_uniform_grid(3, grid_size, k, lo, hi, dtype=dtype)
    knot_map = uniform_knot_map(grid)
    assert knot_map is not None
    offset, inv_h = knot_map
    coordinate = grid * inv_h.unsqueeze(1) + offset.unsqueeze(1)  # knot c sits at (t_c - t_0) / h = c
    steps = torch.arange(grid.shape[1], dtype=dtype).expand_as(grid)
    torch.testing.assert_close(coordinate, steps, atol=20 * torch.finfo(dtype).eps * grid.shape[1], rtol=0)


def test_uniform_knot_map_rejects_knots_that_are_not_uniform_to_their_precision() -> None:
    assert uniform_knot_map(_nonuniform_grid(2, 5, 3, seed=0)) is None
    nudged = make_uniform_grid(2, 5, 3, dtype=torch.float64)
    nudged[1, 4] += 1e-9
    assert uniform_knot_map(nudged) is None
    # float32 knots cast to float64 are uniform only to float32 precision: Cox–de Boor keeps them exact.
    assert uniform_knot_map(make_uniform_grid(2, 5, 3).double()) is None


@pytest.mark.parametrize(("k", "grid_size"), [(k, g) for k in (1, 2, 3, 4) for g in (1, 5, 20)])
def test_uniform_basis_matches_cox_de_boor_inside_outside_and_on_knots(k: int, grid_size: int) -> None:
    grid, knot_map = _uniform_case(3, grid_size, k)
    x = torch.cat([_inputs_away_from_knots(grid, 400, seed=k), grid.T, (grid.T[1:] + grid.T[:-1]) / 2])
    fast = bspline_basis_uniform(x, *knot_map, grid_size + k, k)
    assert fast.shape == (x.shape[0], 3, grid_size + k)
    torch.testing.assert_close(fast, bspline_basis(x, grid, k), atol=1e-13, rtol=0)


@pytest.mark.parametrize(("k", "grid_size"), [(k, g) for k in (1, 2, 3, 4) for g in (1, 5, 20)])
def test_uniform_basis_first_and_second_derivatives_match_cox_de_boor(k: int, grid_size: int) -> None:
    grid, knot_map = _uniform_case(3, grid_size, k)
    x = _inputs_away_from_knots(grid, 300, seed=10 + k).requires_grad_()
    weights = torch.randn(
        300, 3, grid_size + k, generator=torch.Generator().manual_seed(k), dtype=torch.float64
    )
    results = []
    for basis in (
        lambda x: bspline_basis_uniform(x, *knot_map, grid_size + k, k),
        lambda x: bspline_basis(x, grid, k),
    ):
        (first,) = torch.autograd.grad((basis(x) * weights).sum(), x, create_graph=True)
        # Cox–de Boor of order 1 has a piecewise-constant slope with no graph left to differentiate.
        second = torch.autograd.grad(first.sin().sum(), x)[0] if k >= 2 else None
        results.append((first.detach(), second))
    (first_fast, second_fast), (first_ref, second_ref) = results
    torch.testing.assert_close(first_fast, first_ref, atol=1e-12 * grid_size, rtol=1e-12)
    if k >= 2:
        torch.testing.assert_close(second_fast, second_ref, atol=1e-11 * grid_size**2, rtol=1e-11)


@pytest.mark.parametrize("k", [2, 3])
def test_uniform_basis_passes_gradcheck_and_gradgradcheck(k: int) -> None:
    """Reverse and forward mode, and double backward, against finite differences (x away from knots)."""
    grid, knot_map = _uniform_case(2, 4, k)
    x = _inputs_away_from_knots(grid, 6, seed=20 + k).requires_grad_()

    def basis(x: torch.Tensor) -> torch.Tensor:
        return bspline_basis_uniform(x, *knot_map, 4 + k, k)

    assert torch.autograd.gradcheck(basis, (x,), check_forward_ad=True)
    assert torch.autograd.gradgradcheck(basis, (x,), check_fwd_over_rev=True)


def test_uniform_basis_third_derivative_matches_cox_de_boor() -> None:
    """A PINN loss on d²u/dx² differentiated w.r.t. an earlier layer needs d³B/dx³."""
    grid, knot_map = _uniform_case(2, 6, 3)
    x = _inputs_away_from_knots(grid, 50, seed=30).requires_grad_()
    weights = torch.randn(50, 2, 9, generator=torch.Generator().manual_seed(31), dtype=torch.float64)
    thirds = []
    for basis in (lambda x: bspline_basis_uniform(x, *knot_map, 9, 3), lambda x: bspline_basis(x, grid, 3)):
        (first,) = torch.autograd.grad((basis(x) * weights).sum(), x, create_graph=True)
        (second,) = torch.autograd.grad(first.sum(), x, create_graph=True)
        thirds.append(torch.autograd.grad(second.sum(), x)[0])
    torch.testing.assert_close(thirds[0], thirds[1], atol=1e-9, rtol=1e-10)


def test_uniform_basis_under_torch_func_transforms() -> None:
    """vmap over samples of jacrev, jacfwd and hessian (the per-sample NTK and PINN patterns)."""
    grid, knot_map = _uniform_case(3, 5, 3)
    weights = torch.randn(3, 8, generator=torch.Generator().manual_seed(40), dtype=torch.float64)
    x = _inputs_away_from_knots(grid, 7, seed=41)

    def scalar(basis_fn: Callable[[torch.Tensor], torch.Tensor]) -> Callable[[torch.Tensor], torch.Tensor]:
        return lambda sample: (basis_fn(sample.unsqueeze(0))[0] * weights).sum().sin()

    fast = scalar(lambda x: bspline_basis_uniform(x, *knot_map, 8, 3))
    reference = scalar(lambda x: bspline_basis(x, grid, 3))
    for transform in (torch.func.jacrev, torch.func.jacfwd, torch.func.hessian):
        torch.testing.assert_close(
            torch.func.vmap(transform(fast))(x),
            torch.func.vmap(transform(reference))(x),
            atol=1e-11,
            rtol=1e-11,
        )


def test_uniform_basis_differentiated_outside_vmap_and_nested() -> None:
    """Autograd through a vmapped basis (the slots of each sample are offset into the shared buffer)."""
    grid, knot_map = _uniform_case(3, 5, 3)
    x = _inputs_away_from_knots(grid, 24, seed=42).view(4, 2, 3, 3)
    weights = torch.randn(4, 2, 3, 3, 8, generator=torch.Generator().manual_seed(43), dtype=torch.float64)
    results = []
    for basis in (lambda s: bspline_basis_uniform(s, *knot_map, 8, 3), lambda s: bspline_basis(s, grid, 3)):
        leaf = x.clone().requires_grad_()
        values = torch.func.vmap(torch.func.vmap(basis))(leaf)
        (first,) = torch.autograd.grad((values * weights).sum(), leaf, create_graph=True)
        (second,) = torch.autograd.grad(first.square().sum(), leaf)
        results.append((values.detach(), first.detach(), second))
    for fast, reference in zip(*results):
        torch.testing.assert_close(fast, reference, atol=1e-11, rtol=1e-11)


def test_uniform_basis_float32_matches_cox_de_boor() -> None:
    grid = make_uniform_grid(4, 10, 3)
    x = _inputs_away_from_knots(grid.double(), 500, seed=50).float().requires_grad_()
    weights = torch.randn(500, 4, 13, generator=torch.Generator().manual_seed(51))
    fast, reference = bspline_basis_fast(x, grid, 3), bspline_basis(x, grid, 3)
    torch.testing.assert_close(fast, reference, atol=2e-6, rtol=0)
    grads = [torch.autograd.grad((basis * weights).sum(), x)[0] for basis in (fast, reference)]
    torch.testing.assert_close(grads[0], grads[1], atol=2e-4, rtol=1e-5)


def test_uniform_basis_keeps_non_finite_inputs_in_their_own_row() -> None:
    """NaN stays NaN, ±inf gives a zero row, and neither leaks into a neighbour (forward or backward)."""
    grid, knot_map = _uniform_case(1, 5, 3)
    x = torch.tensor([[0.3], [float("nan")], [-0.7], [float("inf")], [0.1], [-float("inf")], [0.9]])
    x = x.double().requires_grad_()
    fast = bspline_basis_uniform(x, *knot_map, 8, 3)
    finite = torch.tensor([0, 2, 4, 6])
    torch.testing.assert_close(fast[finite], bspline_basis(x.detach()[finite], grid, 3), atol=1e-14, rtol=0)
    assert fast[1].isnan().any()
    assert not fast[[3, 5]].any()
    (grad,) = torch.autograd.grad(fast.sum(-1).square().sum(), x)
    assert grad[finite].isfinite().all()


def test_uniform_basis_does_not_recompute_its_signature_per_call(monkeypatch: pytest.MonkeyPatch) -> None:
    """Function.apply binds arguments to forward's signature each call; the signature must come cached."""
    import inspect

    computed = []
    original = inspect._signature_from_function
    monkeypatch.setattr(
        inspect, "_signature_from_function", lambda *a, **k: computed.append(1) or original(*a, **k)
    )
    grid = make_uniform_grid(1, 5, 3)
    offset, inv_h = uniform_knot_map(grid)
    bspline_basis_uniform(torch.rand(16, 1, requires_grad=True), offset, inv_h, 8, 3).sum().backward()
    assert computed == []


def test_fast_basis_dispatches_on_the_knots() -> None:
    uniform, _ = _uniform_case(2, 5, 3)
    nonuniform = _nonuniform_grid(2, 5, 3, seed=60)
    for grid in (uniform, nonuniform):
        x = _inputs_over_support(grid, 100, seed=61)
        torch.testing.assert_close(
            bspline_basis_fast(x, grid, 3), bspline_basis(x, grid, 3), atol=1e-13, rtol=0
        )
    order_zero = make_uniform_grid(2, 5, 0, dtype=torch.float64)
    x = _inputs_over_support(order_zero, 100, seed=62)
    assert torch.equal(bspline_basis_fast(x, order_zero, 0), bspline_basis(x, order_zero, 0))
    with pytest.raises(ValueError, match="k >= 1"):
        bspline_basis_uniform(x, *uniform_knot_map(order_zero), 5, 0)


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
