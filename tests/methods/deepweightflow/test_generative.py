"""Flow matching and DDPM pieces against closed forms: the velocity net's zero start, ODE sampling of a
known velocity field, the CFM loss, DDPM sampling with the exact score of a point mass, PCA."""

from __future__ import annotations

import torch
from torch import nn

from litlab.datamodules.weights import PCA
from litlab.methods.deepweightflow.generative import (
    DDPMSchedule,
    VelocityNet,
    flow_matching_loss,
    sample_ddpm,
    sample_flow,
)


class _Field(nn.Module):
    """A fixed velocity/noise field ``fn(x, t)`` with one (unused) parameter so samplers find a device."""

    def __init__(self, fn) -> None:
        super().__init__()
        self.fn = fn
        self.anchor = nn.Parameter(torch.zeros(()))

    def forward(self, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        return self.fn(x, t)


def test_velocity_net_starts_at_zero_and_keeps_shapes() -> None:
    net = VelocityNet(dim=7, hidden=16)
    out = net(torch.randn(5, 7), torch.rand(5))
    assert out.shape == (5, 7) and torch.count_nonzero(out) == 0
    assert [m.normalized_shape[0] for m in net.trunk if isinstance(m, nn.LayerNorm)] == [16, 8, 16]


def test_samplers_integrate_a_known_field() -> None:
    target = torch.tensor([1.0, -2.0, 0.5])
    # v = c·t: RK4 is exact, x(1) = x0 + c/2; Euler on 50 points (h = 1/49) gives x0 + c(1 − h)/2.
    x0 = torch.randn(4, 3, generator=torch.Generator().manual_seed(0)) * 0.01
    for method, integral in (("rk4", 0.5), ("euler", (1 - 1 / 49) / 2)):
        gen = torch.Generator().manual_seed(0)
        out = sample_flow(_Field(lambda x, t: target * t[:, None]), 4, 3, 0.01, 50, method, gen)
        torch.testing.assert_close(out, x0 + target * integral, atol=1e-5, rtol=0)


def test_flow_matching_loss_is_zero_for_the_oracle_on_a_point_mass() -> None:
    target = torch.tensor([[3.0, -1.0]]).repeat(64, 1)
    # For x1 = c and σ = 0, x_t = (1−t)x0 + t c, so u = c − x0 = (c − x_t)/(1 − t).
    oracle = _Field(lambda x, t: (target[: len(x)] - x) / (1 - t[:, None]))
    assert float(flow_matching_loss(oracle, target, source_std=0.5, sigma=0.0)) < 1e-8
    assert float(flow_matching_loss(_Field(lambda x, t: torch.zeros_like(x)), target, 0.5, 0.0)) > 1.0


def test_ddpm_sampler_with_exact_noise_prediction_returns_the_point_mass() -> None:
    schedule = DDPMSchedule(timesteps=200)
    c = torch.tensor([0.7, -0.3])

    def eps(x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        a = schedule.alpha_bar[(t * schedule.timesteps).round().long()][:, None]
        return (x - a.sqrt() * c) / (1 - a).sqrt()

    expected = torch.cumprod(1 - torch.linspace(1e-4, 0.02, 200, dtype=torch.float64), 0)
    torch.testing.assert_close(schedule.alpha_bar, expected.float())
    out = sample_ddpm(_Field(eps), schedule, 16, 2, torch.Generator().manual_seed(0), prediction="epsilon")
    torch.testing.assert_close(out, c.expand(16, 2), atol=1e-3, rtol=0)
    clean = sample_ddpm(
        _Field(lambda x, t: c.expand_as(x)), schedule, 16, 2, torch.Generator().manual_seed(0)
    )
    torch.testing.assert_close(clean, c.expand(16, 2), atol=1e-3, rtol=0)


def test_pca_round_trip_and_truncation() -> None:
    torch.manual_seed(0)
    x = torch.randn(10, 3) @ torch.randn(3, 40) + 5.0
    full = PCA(x, 3)
    torch.testing.assert_close(full.decode(full.encode(x)), x, atol=1e-4, rtol=0)
    assert abs(full.explained - 1.0) < 1e-6
    assert PCA(x, 1).explained < 1.0
