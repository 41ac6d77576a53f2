"""The synthetic sphere data set: its algebra is a Cartan pair and −θ is the geodesic mirror of θ."""

from __future__ import annotations

import torch

from litlab.datamodules.symmetric_space import (
    fibonacci_sensors,
    sphere_algebra,
    sphere_points,
    symmetric_space_data,
)
from litlab.methods.symspace.lie import cartan_projection, cartan_residuals, commutator_ratio


def test_the_generating_algebra_is_a_non_abelian_cartan_pair() -> None:
    k, p = sphere_algebra()
    terms = [*cartan_residuals(k, p).values(), *cartan_projection(k, p).values()]
    assert all(float(v) < 1e-20 for v in terms)
    assert all(float(v) > 0.1 for v in commutator_ratio(k, p).values())


def test_minus_theta_is_the_geodesic_symmetry_of_the_sphere() -> None:
    torch.manual_seed(0)
    theta = 2 * torch.rand(50, 2, dtype=torch.float64) - 1
    u, mirrored = sphere_points(theta), sphere_points(-theta)
    torch.testing.assert_close(u.norm(dim=1), torch.ones(50, dtype=torch.float64))
    e0 = torch.tensor([1.0, 0.0, 0.0], dtype=torch.float64)
    torch.testing.assert_close(mirrored, 2 * (u @ e0)[:, None] * e0 - u)  # s_o(u) = 2⟨u, o⟩o − u
    # The stabiliser of o (exp of k) fixes the base point.
    k, _ = sphere_algebra()
    torch.testing.assert_close(torch.linalg.matrix_exp(0.7 * k[0]) @ e0, e0)


def test_splits_are_disjoint_and_the_mirror_sources_map_onto_held_out_factors() -> None:
    data = symmetric_space_data(n_grid=12, n_sensors=16, seed=3)
    train, val, held = data.train[1], data.val[1], data.heldout[1]
    assert len(train) + len(val) + len(held) == 144
    assert bool((held >= data.margin).all()) and not bool((train >= data.margin).all(1).any())
    assert not bool((torch.cdist(train, val) == 0).any())
    source, theta = data.mirror_sources()
    assert len(source) + int((val <= -data.margin).all(1).sum()) == len(held)  # the rest are validation
    nearest = torch.cdist(-theta, held).min(dim=1).values
    assert float(nearest.max()) < 1e-5  # every mirror factor −θ is a held-out grid point
    torch.testing.assert_close(data.observe(-theta), data.heldout[0][torch.cdist(-theta, held).argmin(1)])
    assert float(fibonacci_sensors(16).norm(dim=1).sub(1).abs().max()) < 1e-12
