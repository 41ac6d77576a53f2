"""The sampler: Langevin moves keep the posterior, seeded runs repeat, additive structure is recovered."""

from __future__ import annotations

import math

import pytest
import torch

from litlab.core.errors import ConfigError
from litlab.methods.tpnn.basis import train_basis
from litlab.methods.tpnn.estimator import BayesianTPNN, TPNNConfig
from litlab.methods.tpnn.posterior import Node, TPNNPosterior
from litlab.methods.tpnn.priors import EdgePrior, EdgeProposal, GaussianCopy
from litlab.methods.tpnn.sampler import Sampler


def one_node_sampler(seed: int = 0) -> tuple[Sampler, float]:
    generator = torch.Generator().manual_seed(0)
    x = torch.rand(40, 2, generator=generator, dtype=torch.float64)
    y = 1.5 * (x[:, 0] > 0.4) + 0.5 * torch.randn(40, generator=generator, dtype=torch.float64)
    post = TPNNPosterior(
        x,
        y - y.mean(),
        torch.ones(2),
        EdgePrior(2.0, 1.0),
        EdgeProposal(),
        GaussianCopy(),
        max_nodes=1,
        max_order=1,
    )
    return Sampler(post, seed, langevin_step=0.01), 0.25


def test_langevin_gradient_matches_finite_differences() -> None:
    sampler, sigma2 = one_node_sampler()
    vars = torch.tensor([[0]])
    b, lg = torch.tensor([[0.45]], dtype=torch.float64), torch.tensor([[-1.5]], dtype=torch.float64)
    _, grad_b, grad_lg = sampler._value_and_grad(vars, b, lg, sigma2)
    h = 1e-6
    f = lambda bb, ll: float(sampler.collapsed_log_target(vars, bb, ll, sigma2))  # noqa: E731
    assert float(grad_b) == pytest.approx((f(b + h, lg) - f(b - h, lg)) / (2 * h), rel=1e-5)
    assert float(grad_lg) == pytest.approx((f(b, lg + h) - f(b, lg - h)) / (2 * h), rel=1e-5)


@pytest.mark.slow
def test_langevin_moves_sample_the_collapsed_posterior() -> None:
    """Chain means of (b, log gamma) of one fixed node match 2-D quadrature of its posterior."""
    sampler, sigma2 = one_node_sampler(seed=3)
    state = sampler.initial_state(0, sigma2)
    sampler._commit(state, sampler.candidate(state, 0, Node.make([0], [0.5], [-1.0], 1, 2)))
    draws = []
    for t in range(2500):
        sampler.langevin_move(state, adapt=t < 500, iteration=t)
        if t >= 500:
            draws.append((float(state.b[0, 0]), float(state.log_gamma[0, 0])))
    chain = torch.tensor(draws, dtype=torch.float64)
    b = torch.linspace(0.0005, 0.9995, 400, dtype=torch.float64)
    lg = torch.linspace(-7, 3, 400, dtype=torch.float64)
    bb, ll = torch.meshgrid(b, lg, indexing="ij")
    post = sampler.post
    # one node: the collapsed likelihood in closed form, for every grid point at once
    phi = train_basis(
        post.xt, torch.zeros(bb.numel(), 1, dtype=torch.long), bb.reshape(-1, 1), ll.reshape(-1, 1)
    )
    a = (phi * phi).sum(0) + sigma2 / post.beta_var
    u = phi.T @ post.y
    log_ml = -0.5 * (a.log() + math.log(post.beta_var / sigma2) - u**2 / a / sigma2)
    log_post = (log_ml + post.edge_prior.log_prob(bb.reshape(-1), ll.reshape(-1))).reshape(400, 400)
    weights = torch.softmax(log_post.reshape(-1), 0).reshape(400, 400)
    exact = torch.stack([(weights * bb).sum(), (weights * ll).sum()])
    sd = torch.stack(
        [(weights * (bb - exact[0]) ** 2).sum().sqrt(), (weights * (ll - exact[1]) ** 2).sum().sqrt()]
    )
    # the chain's autocorrelation makes its standard error several times sd / sqrt(2000); allow 0.25 sd
    assert torch.all((chain.mean(0) - exact).abs() < 0.25 * sd), (chain.mean(0), exact, sd)
    assert 0.2 < sampler.stats.rates()["langevin"] < 0.95


def additive_data(seed: int = 0, n: int = 300, p: int = 5) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    x = torch.rand(n, p, generator=generator, dtype=torch.float64)
    y = 3 * torch.sin(2 * math.pi * x[:, 0]) + 4 * (x[:, 1] > 0.5) + 0.5 * torch.randn(n, generator=generator)
    return x, y


def test_seeded_fits_repeat_exactly_and_seeds_differ() -> None:
    x, y = additive_data()
    config = TPNNConfig(n_iter=40, burn_in=20, thin=2)
    first, again = BayesianTPNN(config, seed=4).fit(x, y), BayesianTPNN(config, seed=4).fit(x, y)
    other = BayesianTPNN(config, seed=5).fit(x, y)
    for name in ("vars", "b", "log_gamma", "beta", "sigma2"):
        assert torch.equal(getattr(first.draws, name), getattr(again.draws, name)), name
    assert not torch.equal(first.draws.beta, other.draws.beta)
    assert torch.equal(first.predict(x[:10]), again.predict(x[:10]))


def test_the_sampler_recovers_a_planted_additive_structure() -> None:
    """y = 3 sin(2 pi x0) + 4 [x1 > 1/2] + noise with three noise inputs: the two main effects carry
    nearly all the posterior norm, are in every draw, and no other component is of similar size."""
    x, y = additive_data()
    model = BayesianTPNN(TPNNConfig(n_iter=300, burn_in=150, thin=3), seed=0).fit(x, y)
    components = model.components()
    top = {c.variables for c in components[:2]}
    assert top == {(0,), (1,)}
    assert all(c.inclusion == 1.0 for c in components[:2])
    assert all(c.norm < 0.1 * components[1].norm for c in components[2:])
    residual = model.predict(x) - (3 * torch.sin(2 * math.pi * x[:, 0]) + 4 * (x[:, 1] > 0.5))
    assert float((residual - residual.mean()).square().mean().sqrt()) < 0.4


def test_bad_configs_and_calls_are_one_line_errors() -> None:
    with pytest.raises(ConfigError, match="burn_in=10 must be below n_iter=10"):
        BayesianTPNN(TPNNConfig(n_iter=10, burn_in=10))
    with pytest.raises(ConfigError, match="birth_death=false needs initial_nodes > 0"):
        BayesianTPNN(TPNNConfig(birth_death=False, initial_nodes=0))
    with pytest.raises(ConfigError, match="call fit before predicting"):
        BayesianTPNN().predict(torch.zeros(2, 3))
    with pytest.raises(ConfigError, match="input_weights must be 5 positive numbers"):
        BayesianTPNN(TPNNConfig(n_iter=2, burn_in=1)).fit(*additive_data(), input_weights=torch.zeros(5))
