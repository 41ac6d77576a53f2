"""The VP bridge: endpoints, the marginal against Gaussian conditioning, the DBIM sampler."""

from __future__ import annotations

import pytest
import torch

from litlab.methods.bridgedrive.bridge import VPBridge


@pytest.mark.parametrize("beta_d", [1.0, 2.0, 19.9])
def test_marginal_is_the_anchor_at_T_and_the_target_at_0(beta_d: float) -> None:
    bridge = VPBridge(beta_d=beta_d)
    x0, xT, noise = torch.randn(3, 5, 8, 2, dtype=torch.float64)
    at_T = bridge.marginal(x0, xT, torch.full((5,), 1.0), noise)
    at_0 = bridge.marginal(x0, xT, torch.zeros(5), noise)
    torch.testing.assert_close(at_T, xT, atol=1e-12, rtol=0)
    torch.testing.assert_close(at_0, x0, atol=1e-12, rtol=0)


@pytest.mark.parametrize("beta_d", [1.0, 19.9])
def test_coefficients_equal_gaussian_conditioning_of_the_vp_process(beta_d: float) -> None:
    """x_t = α_t x_0 + σ_t ε and x_T = (α_T/α_t) x_t + noise; condition x_t on x_T (brute force, per t)."""
    bridge = VPBridge(beta_d=beta_d)
    t = torch.linspace(0.01, 0.99, 25, dtype=torch.float64)
    alpha_t, sigma_t = bridge.alpha(t), bridge.sigma(t)
    T = torch.tensor(1.0, dtype=torch.float64)
    alpha_T, sigma_T = bridge.alpha(T), bridge.sigma(T)
    torch.testing.assert_close(alpha_t**2 + sigma_t**2, torch.ones_like(t))
    cov = (alpha_T / alpha_t) * sigma_t**2  # Cov(x_t, x_T | x_0)
    gain = cov / sigma_T**2
    a, b, c = bridge.coefficients(t)
    torch.testing.assert_close(a, gain)
    torch.testing.assert_close(b, alpha_t - gain * alpha_T)
    torch.testing.assert_close(c**2, sigma_t**2 - cov**2 / sigma_T**2)


def test_marginal_samples_have_the_bridge_mean_and_variance() -> None:
    bridge = VPBridge()
    n = 200_000
    x0, xT = torch.full((n, 1), 2.0), torch.full((n, 1), -1.0)
    t = torch.full((n,), 0.4)
    samples = bridge.marginal(x0, xT, t, torch.randn(n, 1, generator=torch.Generator().manual_seed(0)))
    a, b, c = (float(v) for v in bridge.coefficients(torch.tensor(0.4)))
    assert abs(samples.mean().item() - (-a + 2 * b)) < 4 * c / n**0.5
    assert abs(samples.std().item() - c) < 0.01 * c


@pytest.mark.parametrize("steps", [1, 2, 5, 20])
def test_sampler_with_a_perfect_denoiser_returns_the_target(steps: int) -> None:
    bridge = VPBridge()
    target, anchor = torch.randn(2, 4, 8, 2)
    calls = []

    def oracle(x: torch.Tensor, t: torch.Tensor, xT: torch.Tensor) -> torch.Tensor:
        calls.append(float(t[0]))
        return target

    out = bridge.sample(oracle, anchor, steps, torch.Generator().manual_seed(0))
    torch.testing.assert_close(out, target)
    assert len(calls) == steps and calls[0] == 1.0


def test_sampler_states_stay_on_the_bridge_of_the_booting_noise() -> None:
    """With a perfect x̂_0, DBIM's state at each grid time is a_t x_T + b_t x_0 + c_t ε for one fixed ε."""
    bridge = VPBridge()
    target, anchor = torch.randn(2, 3, 8, 2, dtype=torch.float64)
    states = []

    def oracle(x: torch.Tensor, t: torch.Tensor, xT: torch.Tensor) -> torch.Tensor:
        states.append((t[0].item(), x.clone()))
        return target

    bridge.sample(oracle, anchor, 5, torch.Generator().manual_seed(1))
    t1, x1 = states[1]
    a, b, c = bridge.coefficients(torch.tensor(t1))
    eps = (x1 - a * anchor - b * target) / c
    for t, x in states[2:]:
        a, b, c = bridge.coefficients(torch.tensor(t))
        torch.testing.assert_close(x, a * anchor + b * target + c * eps)
