"""The Bregman losses: derivatives against autograd, the link against a brute-force minimiser of φ(β, ·),
the excess risk against the Bregman divergence of F(β) = −min_f φ(β, f), and the two error estimates."""

from __future__ import annotations

import pytest
import torch

from litlab.core.errors import ConfigError
from litlab.datamodules.density_ratio import GaussianMixturePair
from litlab.methods.dre.losses import LOSSES, get_loss

NAMES = sorted(LOSSES)
F_VALUES = torch.linspace(-0.9, 2.5, 13, dtype=torch.float64)
BETAS = torch.tensor([0.05, 0.3, 1.0, 2.0, 7.5], dtype=torch.float64)


@pytest.mark.parametrize("name", NAMES)
def test_derivatives_match_autograd(name: str) -> None:
    loss = get_loss(name)
    for value, first, second in ((loss.pos, loss.d_pos, loss.dd_pos), (loss.neg, loss.d_neg, loss.dd_neg)):
        derivative = torch.func.grad(value)
        torch.testing.assert_close(torch.func.vmap(derivative)(F_VALUES), first(F_VALUES))
        torch.testing.assert_close(torch.func.vmap(torch.func.grad(derivative))(F_VALUES), second(F_VALUES))


@pytest.mark.parametrize("name", NAMES)
def test_inverse_link_minimises_the_pointwise_risk_and_inverts_the_link(name: str) -> None:
    loss = get_loss(name)
    grid = torch.linspace(-6, 6, 120001, dtype=torch.float64)
    for beta in BETAS:
        best = grid[loss.pointwise(beta, loss.clip(grid)).argmin()]
        f_star = loss.inverse_link(beta)
        assert loss.pointwise(beta, f_star) <= loss.pointwise(beta, loss.clip(best)) + 1e-9
        torch.testing.assert_close(loss.link(f_star), beta)


@pytest.mark.parametrize("name", NAMES)
def test_excess_is_the_bregman_divergence_of_the_negated_minimal_risk(name: str) -> None:
    loss = get_loss(name)

    def generator(beta: torch.Tensor) -> torch.Tensor:
        return -loss.pointwise(beta, loss.inverse_link(beta))

    estimates = torch.tensor([0.2, 0.9, 1.6, 4.0], dtype=torch.float64)
    for beta in BETAS:
        for b in estimates:
            point = b.clone().requires_grad_(True)
            (slope,) = torch.autograd.grad(generator(point), point)
            bregman = generator(beta) - generator(b) - slope * (beta - b)
            torch.testing.assert_close(loss.excess(beta, loss.inverse_link(b)), bregman)
            assert bregman >= -1e-12


def test_kulsif_error_is_the_mean_squared_ratio_error() -> None:
    beta, beta_hat = torch.tensor([0.5, 1.0, 3.0]), torch.tensor([1.0, 0.0, 2.5])
    torch.testing.assert_close(get_loss("kulsif").error(beta, beta_hat), (beta - beta_hat).square().mean())
    # a negative f is clipped to β̂ = 0 before scoring
    torch.testing.assert_close(
        get_loss("kulsif").excess(torch.tensor(2.0), torch.tensor(-1.0)), torch.tensor(2.0)
    )


@pytest.mark.parametrize("name", ["lr", "sq", "kulsif"])
def test_risk_error_agrees_with_the_pointwise_error(name: str) -> None:
    # a mild pair (light ratio tails) so both Monte Carlo estimates are tight
    pair = GaussianMixturePair(2, 2, 0.5)
    generator = torch.Generator().manual_seed(0)
    x_p, x_q = pair.sample_p(400_000, generator), pair.sample_q(400_000, generator)
    loss = get_loss(name)
    model = lambda x: 0.3 * torch.tanh(x[:, 0]) + 0.1  # noqa: E731
    beta_q = pair.log_ratio(x_q).exp()
    bayes = -pair.second_moment() / 2 if name == "kulsif" else loss.bayes_risk(beta_q)
    pointwise = loss.error(beta_q, model(x_q))
    torch.testing.assert_close(
        loss.risk_error(model(x_p), model(x_q), bayes), pointwise, rtol=2e-2, atol=2e-3
    )


def test_unknown_loss_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="kulsif, lr, exp, sq"):
        get_loss("hinge")
