"""The policy-gradient estimator against the exact gradient of E[J], by enumerating all 2^10 masks."""

import itertools

import pytest
import torch

from litlab.core.errors import ConfigError
from litlab.methods.datamask.estimator import advantages, policy_gradient
from litlab.methods.datamask.objective import mask_objective, second_moment_kernel

N = 10


@pytest.fixture(scope="module")
def problem():
    """A random 10-document problem: all masks (1024, 10), their J, θ and the exact ∇_θ E[J] (autograd)."""
    gen = torch.Generator().manual_seed(0)
    quality = torch.rand(N, generator=gen, dtype=torch.float64)
    emb = torch.randn(N, 4, generator=gen, dtype=torch.float64)
    emb = emb / emb.norm(dim=1, keepdim=True)
    masks = torch.tensor(list(itertools.product([0.0, 1.0], repeat=N)), dtype=torch.float64)
    rewards = mask_objective(masks, quality, second_moment_kernel(emb), 0.6, 2.0, 0.3, N)
    theta = torch.randn(N, generator=gen, dtype=torch.float64).requires_grad_(True)
    probs = torch.sigmoid(theta)
    log_p = (masks * probs.log() + (1 - masks) * (1 - probs).log()).sum(1)
    (exact,) = torch.autograd.grad((log_p.exp() * rewards).sum(), theta)
    weights = log_p.exp().detach()
    return masks, rewards, probs.detach(), weights, exact, quality, emb


def test_enumeration_covers_all_masks(problem):
    masks, _, _, weights, *_ = problem
    assert len(masks.unique(dim=0)) == 2**N
    assert weights.sum().item() == pytest.approx(1.0, abs=1e-12)


def test_single_sample_estimator_is_unbiased(problem):
    masks, rewards, probs, weights, exact, *_ = problem
    estimates = policy_gradient(masks[:, None], rewards[:, None], probs, baseline="none")
    expectation = (weights[:, None] * estimates).sum(0)
    torch.testing.assert_close(expectation, exact, rtol=1e-10, atol=1e-12)


def _pair_expectation(problem, baseline: str) -> tuple[torch.Tensor, torch.Tensor]:
    """E over all (m₁, m₂) pairs of the G = 2 estimator: 2^20 pairs, enumerated exactly."""
    masks, rewards, probs, weights, exact, *_ = problem
    a, b = torch.meshgrid(torch.arange(2**N), torch.arange(2**N), indexing="ij")
    a, b = a.flatten(), b.flatten()
    estimates = policy_gradient(
        torch.stack([masks[a], masks[b]], 1), torch.stack([rewards[a], rewards[b]], 1), probs, baseline
    )
    return ((weights[a] * weights[b])[:, None] * estimates).sum(0), exact


def test_leave_one_out_group_estimator_is_unbiased(problem):
    expectation, exact = _pair_expectation(problem, "loo")
    torch.testing.assert_close(expectation, exact, rtol=1e-9, atol=1e-12)


def test_group_mean_baseline_shrinks_by_g_minus_one_over_g(problem):
    expectation, exact = _pair_expectation(problem, "group")
    torch.testing.assert_close(expectation, exact / 2, rtol=1e-9, atol=1e-12)


def test_large_group_monte_carlo_matches_exact(problem):
    """G = 16 masks drawn 20k times: the mean LOO estimate is within 5 standard errors of the exact value."""
    _, _, probs, _, exact, quality, emb = problem
    gen = torch.Generator().manual_seed(1)
    draws = (torch.rand(20_000, 16, N, generator=gen, dtype=torch.float64) < probs).double()
    rewards = mask_objective(draws, quality, second_moment_kernel(emb), 0.6, 2.0, 0.3, N)
    estimates = policy_gradient(draws, rewards, probs, baseline="loo")
    error = (estimates.mean(0) - exact).abs()
    assert (error < 5 * estimates.std(0) / 20_000**0.5).all()


def test_normalized_advantages_have_unit_scale():
    rewards = torch.tensor([[1.0, 2.0, 4.0, 9.0]])
    adv = advantages(rewards, "group", normalize=True)
    torch.testing.assert_close(adv, (rewards - rewards.mean()) / rewards.std())
    assert adv.sum().abs() < 1e-6


def test_bad_baseline_is_one_clear_error():
    with pytest.raises(ConfigError, match="baseline"):
        advantages(torch.zeros(1, 4), "mean")
    with pytest.raises(ConfigError, match="group_size"):
        advantages(torch.zeros(1, 1), "loo")
