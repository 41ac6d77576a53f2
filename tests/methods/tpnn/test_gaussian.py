"""The collapsed likelihood against a direct multivariate normal, and the conjugate draws' moments."""

from __future__ import annotations

import pytest
import torch

from litlab.methods.tpnn.gaussian import log_marginal_likelihood, sample_beta, sample_noise_variance


def setting():
    generator = torch.Generator().manual_seed(0)
    phi = torch.randn(30, 5, generator=generator, dtype=torch.float64)
    active = torch.tensor([True, False, True, True, False])
    phi = phi * active
    y = torch.randn(30, generator=generator, dtype=torch.float64)
    return phi, active, y


def test_log_marginal_likelihood_is_the_normal_density_of_y() -> None:
    phi, active, y = setting()
    sigma2, s = 0.7, 2.0
    value = log_marginal_likelihood(phi.T @ phi, phi.T @ y, active, float(y @ y), 30, sigma2, s)
    cov = sigma2 * torch.eye(30, dtype=torch.float64) + s * phi @ phi.T
    direct = torch.distributions.MultivariateNormal(torch.zeros(30, dtype=torch.float64), cov).log_prob(y)
    assert float(value) == pytest.approx(float(direct), rel=1e-7)


def test_beta_draws_have_the_conditional_mean_and_covariance() -> None:
    phi, active, y = setting()
    sigma2, s = 0.5, 1.5
    generator = torch.Generator().manual_seed(1)
    draws = torch.stack(
        [sample_beta(phi.T @ phi, phi.T @ y, active, sigma2, s, generator) for _ in range(8000)]
    )
    a = phi[:, active].T @ phi[:, active] + sigma2 / s * torch.eye(3, dtype=torch.float64)
    mean = torch.linalg.solve(a, phi[:, active].T @ y)
    cov = sigma2 * torch.linalg.inv(a)
    assert torch.all(draws[:, ~active] == 0)
    assert torch.allclose(draws[:, active].mean(0), mean, atol=0.01)
    assert torch.allclose(torch.cov(draws[:, active].T), cov, atol=0.005)


def test_noise_variance_draws_are_inverse_gamma() -> None:
    residual = torch.full((40,), 0.5, dtype=torch.float64)
    generator = torch.Generator().manual_seed(2)
    draws = torch.tensor([sample_noise_variance(residual, 2.0, 0.3, generator) for _ in range(8000)])
    shape, scale = 2.0 + 20, 0.3 + 0.5 * 40 * 0.25
    assert float(draws.mean()) == pytest.approx(scale / (shape - 1), rel=0.01)
