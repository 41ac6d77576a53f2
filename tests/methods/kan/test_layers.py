"""KANLayer / KAN against a per-edge loop built on scipy splines, batch standardisation, and grid updates."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from scipy.interpolate import BSpline

from litlab.kernels.bspline import bspline_basis
from litlab.methods.kan.layers import KAN, KANLayer


def _randomise(model: torch.nn.Module, seed: int) -> None:
    """Give every parameter (c and bias included) non-trivial random values."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.copy_(0.5 * torch.randn(parameter.shape, generator=generator, dtype=parameter.dtype))


def _scipy_basis_matrix(x: np.ndarray, knots: np.ndarray, k: int) -> np.ndarray:
    """(n, G + k): each B_m from scipy's basis_element, 0 outside its support (also beyond [t_k, t_{G+k}])."""
    elements = [
        BSpline.basis_element(knots[m : m + k + 2], extrapolate=False) for m in range(len(knots) - k - 1)
    ]
    return np.nan_to_num(np.stack([element(x) for element in elements], axis=1), nan=0.0)


def _naive_layer(layer: KANLayer, x: np.ndarray) -> np.ndarray:
    """y_j = Σ_i [ r_ji SiLU(x_i) + c_ji Σ_m b_jim B̂_m(x_i) ] + bias_j, looping over edges."""
    r, b, c, bias = (
        p.detach().numpy()
        for p in (layer.residual_weight, layer.spline_weight, layer.spline_scale, layer.bias)
    )
    grid, k = layer.grid.numpy(), layer.spline_order
    y = np.tile(bias, (x.shape[0], 1))
    for i in range(layer.n_in):
        silu = x[:, i] / (1 + np.exp(-x[:, i]))
        bases = _scipy_basis_matrix(x[:, i], grid[i], k)
        if layer.standardize_basis:
            bases = (bases - bases.mean(0)) / np.sqrt(bases.var(0) + 1e-5)
        for j in range(layer.n_out):
            y[:, j] += r[j, i] * silu + c[j, i] * bases @ b[j, i]
    return y


@pytest.mark.parametrize("standardize_basis", [False, True])
@pytest.mark.parametrize("spline_order", [1, 3])
def test_kan_forward_matches_per_edge_loop(standardize_basis: bool, spline_order: int) -> None:
    init = {"name": "lecun_normalized"} if standardize_basis else "baseline"
    model = KAN([3, 4, 2], grid_size=5, spline_order=spline_order, init=init, backend="torch").double()
    _randomise(model, seed=0)
    x = torch.rand(50, 3, generator=torch.Generator().manual_seed(1), dtype=torch.float64) * 2.2 - 1.1
    expected = x.numpy()
    for layer in model.layers:
        expected = _naive_layer(layer, expected)
    with torch.no_grad():
        got = model(x)
    assert got.shape == (50, 2)
    np.testing.assert_allclose(got.numpy(), expected, atol=1e-10, rtol=0)


def test_folded_matmul_gives_the_same_gradients_as_the_edgewise_formula() -> None:
    layer = KANLayer(3, 4, grid_size=5, backend="torch").double()
    _randomise(layer, seed=2)
    x = torch.rand(20, 3, generator=torch.Generator().manual_seed(3), dtype=torch.float64) * 2 - 1

    def edgewise(x: torch.Tensor) -> torch.Tensor:
        splines = torch.einsum("bim,jim->bji", bspline_basis(x, layer.grid, 3), layer.spline_weight)
        residual = layer.residual_weight * F.silu(x).unsqueeze(1)
        return (residual + layer.spline_scale * splines).sum(-1) + layer.bias

    grads = [torch.autograd.grad(fn(x).sin().sum(), list(layer.parameters())) for fn in (layer, edgewise)]
    for folded, reference in zip(*grads):
        torch.testing.assert_close(folded, reference, atol=1e-12, rtol=0)


def test_standardised_basis_has_zero_mean_unit_variance_per_input_and_function() -> None:
    layer = KANLayer(3, 2, grid_size=5, standardize_basis=True).double()
    x = torch.rand(400, 3, generator=torch.Generator().manual_seed(4), dtype=torch.float64) * 2 - 1
    bases = layer.basis(x)
    torch.testing.assert_close(bases.mean(0), torch.zeros(3, 8, dtype=torch.float64), atol=1e-12, rtol=0)
    raw_var = layer.raw_basis(x).var(0, correction=0)
    torch.testing.assert_close(bases.var(0, correction=0), raw_var / (raw_var + 1e-5), atol=1e-12, rtol=0)


def _fit_smooth_splines(layer: KANLayer, amplitude: float, seed: int) -> None:
    """Set every edge spline to the least-squares fit of amplitude·sin(a_ji x + p_ji) on [-1, 1]."""
    generator = torch.Generator().manual_seed(seed)
    shape = (layer.n_out, layer.n_in, 1)
    freq = 1 + 2 * torch.rand(shape, generator=generator, dtype=torch.float64)
    phase = 3 * torch.rand(shape, generator=generator, dtype=torch.float64)
    xs = torch.linspace(-1, 1, 500, dtype=torch.float64)
    design = bspline_basis(xs.unsqueeze(1).expand(-1, layer.n_in), layer.grid, layer.spline_order)
    targets = amplitude * torch.sin(freq * xs + phase)  # (n_out, n_in, 500)
    fits = torch.linalg.lstsq(
        design.transpose(0, 1), targets.permute(1, 2, 0)
    ).solution  # (n_in, G + k, n_out)
    with torch.no_grad():
        layer.spline_weight.copy_(fits.permute(2, 0, 1))


@pytest.mark.parametrize("grid_size", [5, 10])
def test_update_grid_moves_knots_to_the_data_and_keeps_the_function(grid_size: int) -> None:
    """Smooth edge functions survive the move to quantile knots up to a small least-squares error."""
    layer = KANLayer(3, 4, grid_size, backend="torch").double()
    _fit_smooth_splines(layer, amplitude=1.0, seed=5)
    x = (0.4 * torch.randn(2000, 3, generator=torch.Generator().manual_seed(6), dtype=torch.float64)).clamp(
        -1, 1
    )
    with torch.no_grad():
        before = layer(x)
    layer.update_grid(x)
    with torch.no_grad():
        after = layer(x)

    k = layer.spline_order
    assert torch.all(layer.grid.diff(dim=1) > 0)
    assert torch.all(layer.grid[:, k] < x.min(0).values) and torch.all(
        layer.grid[:, grid_size + k] > x.max(0).values
    )
    # The interior knots crowd where the N(0, 0.4²) density is high, closer than the uniform spacing.
    assert layer.grid[:, k + 1 : grid_size + k].diff(dim=1).min() < 2 / grid_size
    # Measured 1e-3 (G = 5) and 2e-4 (G = 10).
    assert ((after - before).norm() / before.norm()).item() < 3e-3


def test_kan_update_grid_keeps_the_network_function() -> None:
    model = KAN([2, 3, 1], grid_size=8, backend="torch").double()
    for seed, layer in enumerate(model.layers):
        _fit_smooth_splines(layer, amplitude=0.3, seed=seed)
        torch.nn.init.normal_(layer.residual_weight, std=0.1, generator=torch.Generator().manual_seed(seed))
    x = torch.rand(1000, 2, generator=torch.Generator().manual_seed(7), dtype=torch.float64) * 1.6 - 0.8
    with torch.no_grad():
        before = model(x)
    model.update_grid(x)
    with torch.no_grad():
        after = model(x)
    assert ((after - before).norm() / before.norm()).item() < 1e-3  # measured 5e-5


def test_update_grid_refuses_a_standardised_basis() -> None:
    layer = KANLayer(2, 2, grid_size=5, standardize_basis=True)
    with pytest.raises(ValueError, match="standardised"):
        layer.update_grid(torch.rand(10, 2))
