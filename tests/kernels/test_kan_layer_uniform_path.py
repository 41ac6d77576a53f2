"""KANLayer's closed-form basis path: when it is taken, and that the layer computes what Cox–de Boor gives."""

from __future__ import annotations

import copy

import pytest
import torch

from litlab.kernels.bspline import make_uniform_grid
from litlab.methods.kan.layers import KAN, KANLayer


def _randomise(model: torch.nn.Module, seed: int) -> None:
    """Non-trivial values for every parameter (c and bias included)."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.copy_(0.5 * torch.randn(parameter.shape, generator=generator, dtype=parameter.dtype))


def _with_cox_de_boor(model: KAN) -> KAN:
    """A copy whose layers always take the Cox–de Boor path (the reference)."""
    reference = copy.deepcopy(model)
    for layer in reference.layers:
        layer.uniform_knot_map = lambda: None
    return reference


def _float64_kan(widths: list[int], grid_size: int, seed: int) -> KAN:
    """A float64 KAN with knots built in float64 (so they are uniform to float64 precision)."""
    model = KAN(widths, grid_size, backend="torch").double()
    with torch.no_grad():
        for layer in model.layers:
            layer.grid.copy_(
                make_uniform_grid(layer.n_in, grid_size, layer.spline_order, dtype=torch.float64)
            )
    _randomise(model, seed)
    return model


def test_closed_form_is_used_exactly_while_the_knots_are_uniform() -> None:
    layer = KANLayer(3, 2, grid_size=5, backend="torch")
    assert layer.uniform_knot_map() is not None
    fresh_state = copy.deepcopy(layer.state_dict())

    layer.update_grid(0.3 * torch.randn(200, 3, generator=torch.Generator().manual_seed(0)))
    assert layer.uniform_knot_map() is None  # quantile knots: Cox–de Boor
    layer.load_state_dict(fresh_state)
    assert layer.uniform_knot_map() is not None  # loading uniform knots in place is seen too

    # Casting float32 knots to float64 leaves them uniform only to float32 precision.
    assert layer.double().uniform_knot_map() is None
    assert KANLayer(3, 2, grid_size=5, spline_order=0).uniform_knot_map() is None


@pytest.mark.parametrize(
    ("standardize_basis", "dtype", "tolerance"),
    [(False, torch.float32, 2e-5), (False, torch.float64, 1e-12), (True, torch.float64, 1e-12)],
)
def test_layer_matches_cox_de_boor_outputs_and_gradients(
    standardize_basis: bool, dtype: torch.dtype, tolerance: float
) -> None:
    """Outputs and every gradient, relative to their largest entry (float32: rounding of the basis only)."""
    init = {"name": "lecun_normalized"} if standardize_basis else "baseline"
    model = KAN([3, 4, 2], grid_size=5, init=init, backend="torch").to(dtype)
    with torch.no_grad():
        for layer in model.layers:
            layer.grid.copy_(make_uniform_grid(layer.n_in, 5, layer.spline_order, dtype=dtype))
    _randomise(model, seed=1)
    assert all(layer.uniform_knot_map() is not None for layer in model.layers)
    reference = _with_cox_de_boor(model)
    x = torch.rand(256, 3, generator=torch.Generator().manual_seed(2), dtype=dtype) * 2.4 - 1.2
    x.requires_grad_()
    results = []
    for net in (model, reference):
        y = net(x)
        results.append([y.detach(), *torch.autograd.grad(y.sin().sum(), [x, *net.parameters()])])
    for fast, slow in zip(*results):
        torch.testing.assert_close(fast, slow, atol=tolerance * slow.abs().max().item(), rtol=0)


def test_pinn_loss_on_second_derivatives_has_the_reference_parameter_gradient() -> None:
    """Loss = mean (Δu)² with Δu by create_graph, then d loss/dθ: third order through layer 2's basis."""
    model = KAN([2, 5, 1], grid_size=5, backend="torch").double()
    with torch.no_grad():  # knots built in float64, so they are uniform to float64 precision
        for layer in model.layers:
            layer.grid.copy_(make_uniform_grid(layer.n_in, 5, layer.spline_order, dtype=torch.float64))
    _randomise(model, seed=3)
    assert all(layer.uniform_knot_map() is not None for layer in model.layers)
    reference = _with_cox_de_boor(model)
    x = (
        torch.rand(64, 2, generator=torch.Generator().manual_seed(4), dtype=torch.float64) * 2 - 1
    ).requires_grad_()
    results = []
    for net in (model, reference):
        (grad_u,) = torch.autograd.grad(net(x).sum(), x, create_graph=True)
        laplacian = sum(
            torch.autograd.grad(grad_u[:, d].sum(), x, create_graph=True)[0][:, d] for d in range(x.shape[1])
        )
        loss = laplacian.square().mean()
        # The last bias does not reach Δu: its gradient is 0 in both.
        grads = torch.autograd.grad(loss, list(net.parameters()), allow_unused=True, materialize_grads=True)
        results.append((laplacian.detach(), grads))
    (laplacian_fast, grads_fast), (laplacian_ref, grads_ref) = results
    assert laplacian_ref.abs().max() > 1e-2  # the check is not vacuous
    torch.testing.assert_close(laplacian_fast, laplacian_ref, atol=1e-10, rtol=1e-10)
    for fast, slow in zip(grads_fast, grads_ref):
        torch.testing.assert_close(fast, slow, atol=1e-9, rtol=1e-9)
