"""The TPNN basis against its formula, the sum-to-zero condition and frozen constants."""

from __future__ import annotations

import torch

from litlab.methods.tpnn.basis import basis, by_variable, sum_to_zero_constants, train_basis


def nodes(p: int = 4) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    vars = torch.tensor([[0, 2, p], [1, p, p], [0, 1, 3]])
    generator = torch.Generator().manual_seed(0)
    b = torch.rand(3, 3, generator=generator, dtype=torch.float64)
    lg = torch.randn(3, 3, generator=generator, dtype=torch.float64) - 1
    return vars, b, lg


def test_basis_is_the_product_of_centred_sigmoid_factors() -> None:
    x = torch.rand(50, 4, dtype=torch.float64)
    vars, b, lg = nodes()
    xt = by_variable(x)
    c = sum_to_zero_constants(xt, vars, b, lg)
    phi = basis(xt, vars, b, lg, c)
    expected = torch.ones(50, 3, dtype=torch.float64)
    for k in range(3):
        for d in range(3):
            j = int(vars[k, d])
            if j < 4:
                s = torch.sigmoid((x[:, j] - b[k, d]) / lg[k, d].exp())
                m = s.mean()
                assert torch.isclose(c[k, d], -(1 - m) / m)
                expected[:, k] *= 1 - s + c[k, d] * s
    assert torch.allclose(phi, expected)
    assert torch.allclose(train_basis(xt, vars, b, lg), expected)


def test_every_factor_and_every_node_has_zero_training_mean() -> None:
    x = torch.rand(200, 4, dtype=torch.float64)
    vars, b, lg = nodes()
    xt = by_variable(x)
    phi = train_basis(xt, vars, b, lg)
    single = torch.tensor([[0, 4, 4], [3, 4, 4]])
    assert torch.allclose(
        train_basis(xt, single, b[:2], lg[:2]).mean(0), torch.zeros(2, dtype=torch.float64), atol=1e-12
    )
    # node products average to zero exactly over a product-design grid (independent coordinates)
    grid = torch.cartesian_prod(*[torch.linspace(0, 1, 7, dtype=torch.float64)] * 4)
    gt = by_variable(grid)
    assert torch.allclose(
        train_basis(gt, vars, b, lg).mean(0), torch.zeros(3, dtype=torch.float64), atol=1e-12
    )
    assert phi.shape == (200, 3)


def test_constants_are_frozen_for_new_inputs() -> None:
    x, x_new = torch.rand(100, 4, dtype=torch.float64), torch.rand(30, 4, dtype=torch.float64)
    vars, b, lg = nodes()
    c = sum_to_zero_constants(by_variable(x), vars, b, lg)
    frozen = basis(by_variable(x_new), vars, b, lg, c)
    refit = train_basis(by_variable(x_new), vars, b, lg)
    assert not torch.allclose(frozen, refit)
    both = basis(by_variable(torch.cat([x, x_new])), vars, b, lg, c)
    assert torch.allclose(both[100:], frozen)
