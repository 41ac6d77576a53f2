"""The aggregation's closed form against its definition, and the baselines' weights.

Checks: the weights solve their (jittered) normal equations; Ĝ and r̂ equal the Hessian-weighted Gram
matrix and the Newton-step target computed by autograd; for KuLSIF r̂ is mean_P f and the reference drops
out; with one candidate the aggregate is the candidate itself when the candidate already minimises the
risk along its own ray (an unregularised fit), and the best rescaling of it otherwise; repeated Newton
steps reach the risk minimiser over the span; P = Q gives β̂ ≈ 1.
"""

from __future__ import annotations

import pytest
import torch

from litlab.core.errors import ConfigError
from litlab.methods.dre.aggregation import (
    aggregate,
    bma_weights,
    hessian_system,
    selection_weights,
    solve_weights,
    super_learner_weights,
    uniform_weights,
)
from litlab.methods.dre.compare import GridSpec, RatioProblem, estimate
from litlab.methods.dre.estimators import fit_grid
from litlab.methods.dre.losses import get_loss
from tests.methods.dre.helpers import grid_axes, samples


def candidates(method: str = "kulsif", seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    x_p, x_q = samples(200, 250, seed=seed, separation=1.5)
    grid = fit_grid(method, x_p, x_q, x_p[:40], *grid_axes([0.5, 1.0, 2.0], [1e-3, 1e-1, 10.0]))
    held_p, held_q = samples(150, 180, seed=seed + 100, separation=1.5)
    return grid.predict(held_p), grid.predict(held_q)


@pytest.mark.parametrize("name", ["kulsif", "lr", "exp", "sq"])
def test_hessian_system_is_the_quadratic_model_of_the_risk(name: str) -> None:
    loss = get_loss(name)
    f_p, f_q = candidates(name if name != "kulsif" else "kulsif")
    ref = torch.full((len(f_p),), 1 / len(f_p), dtype=torch.float64)

    def risk(alpha: torch.Tensor) -> torch.Tensor:
        return loss.risk(alpha @ f_p, alpha @ f_q)

    gram, target = hessian_system(loss, f_p, f_q, ref @ f_p, ref @ f_q)
    hessian = torch.autograd.functional.hessian(risk, ref)
    gradient = torch.func.grad(risk)(ref)
    torch.testing.assert_close(gram, hessian)
    # minimiser of the second-order model R(ref) + g·(α − ref) + ½(α − ref)ᵀH(α − ref) solves Gα = Hα_ref − g
    torch.testing.assert_close(target, hessian @ ref - gradient)


def test_weights_solve_their_normal_equations() -> None:
    loss = get_loss("lr")
    f_p, f_q = candidates("lr")
    alpha = aggregate(loss, f_p, f_q, jitter=1e-3)
    gram, target = hessian_system(loss, f_p, f_q, f_p.mean(0), f_q.mean(0))
    torch.testing.assert_close((gram + 1e-3 * torch.diag(gram.diagonal())) @ alpha, target)
    torch.testing.assert_close(solve_weights(gram, target, 1e-3), alpha)


def test_kulsif_aggregation_is_lsif_over_the_span_and_ignores_the_reference() -> None:
    loss = get_loss("kulsif")
    f_p, f_q = candidates()
    gram, target = hessian_system(
        loss,
        f_p,
        f_q,
        torch.randn(f_p.shape[1], dtype=torch.float64),
        torch.randn(f_q.shape[1], dtype=torch.float64),
    )
    torch.testing.assert_close(gram, f_q @ f_q.T / f_q.shape[1])
    torch.testing.assert_close(target, f_p.mean(1))
    torch.testing.assert_close(aggregate(loss, f_p, f_q, reference="constant"), aggregate(loss, f_p, f_q))


@pytest.mark.parametrize("name", ["kulsif", "lr", "sq"])
def test_one_unregularised_candidate_aggregates_to_itself(name: str) -> None:
    loss = get_loss(name)
    x_p, x_q = samples(150, 170, separation=1.5)
    grid = fit_grid(name, x_p, x_q, x_p[:10], *grid_axes([1.5], [0.0 if name != "lr" else 1e-12]))
    f_p, f_q = grid.predict(x_p), grid.predict(x_q)
    # an ERM over a cone containing its own rescalings: the risk is stationary along f, so α = 1
    alpha = aggregate(loss, f_p, f_q, jitter=0.0, reference="mean")
    torch.testing.assert_close(alpha, torch.ones(1, dtype=torch.float64), atol=1e-6, rtol=0)


def test_one_regularised_candidate_gets_its_best_rescaling() -> None:
    loss = get_loss("kulsif")
    f_p, f_q = candidates()
    one_p, one_q = f_p[4:5], f_q[4:5]
    alpha = aggregate(loss, one_p, one_q, jitter=0.0)
    scales = torch.linspace(0.0, 3.0, 30001, dtype=torch.float64)
    best = scales[loss.risk(scales[:, None] * one_p, scales[:, None] * one_q).argmin()]
    assert float(alpha) == pytest.approx(float(best), abs=1e-4)
    # duplicating a candidate changes neither the aggregate nor its risk
    twice = aggregate(loss, one_p.repeat(2, 1), one_q.repeat(2, 1), jitter=1e-9)
    torch.testing.assert_close(twice.sum(), alpha[0], rtol=1e-6, atol=0)


def test_newton_steps_reach_the_risk_minimiser_over_the_span() -> None:
    loss = get_loss("lr")
    f_p, f_q = candidates("lr")
    alpha = aggregate(loss, f_p, f_q, jitter=1e-10, newton_steps=15).requires_grad_(True)
    (gradient,) = torch.autograd.grad(loss.risk(alpha @ f_p, alpha @ f_q), alpha)
    assert gradient.abs().max() < 1e-7
    one_step = aggregate(loss, f_p, f_q, jitter=1e-10)
    assert loss.risk(alpha @ f_p, alpha @ f_q) <= loss.risk(one_step @ f_p, one_step @ f_q) + 1e-12


def test_equal_distributions_give_a_ratio_near_one() -> None:
    # P = Q = N(0, I_2): the cross-fitted KuLSIF aggregate of the full 5 x 11 grid, n = 2000 per distribution.
    # Measured on seeds 0-5: mean |β̂ − 1| 0.06-0.12 (CV's choice: 0.02-0.14), mean β̂ 1.008-1.044.
    for seed in (0, 1, 2):
        generator = torch.Generator().manual_seed(seed)
        x = torch.randn(4000, 2, generator=generator, dtype=torch.float64)
        x_eval = torch.randn(4000, 2, generator=generator, dtype=torch.float64)
        result = estimate(
            RatioProblem(x[:2000], x[2000:], x_eval, x_eval, {}), GridSpec("kulsif", n_centres=100)
        )
        beta = result.loss.link(result.predictions["aggregation"][1])
        assert float((beta - 1).abs().mean()) < 0.2
        assert float(beta.mean()) == pytest.approx(1.0, abs=0.06)


def test_baseline_weights() -> None:
    risk = torch.tensor([0.3, -0.2, 0.1], dtype=torch.float64)
    torch.testing.assert_close(selection_weights(risk), torch.tensor([0.0, 1.0, 0.0], dtype=torch.float64))
    bma = bma_weights(risk, 10.0)
    torch.testing.assert_close(bma, torch.exp(-10 * risk) / torch.exp(-10 * risk).sum())
    torch.testing.assert_close(uniform_weights(4), torch.full((4,), 0.25, dtype=torch.float64))
    f_p, f_q = candidates()
    stacked = super_learner_weights(get_loss("kulsif"), f_p, f_q)
    assert (stacked >= 0).all() and stacked.sum() > 0
    # with no sign constraint active, non-negative stacking is the (jittered) aggregation
    positive_p, positive_q = f_p[[2, 5]], f_q[[2, 5]]
    unconstrained = aggregate(get_loss("kulsif"), positive_p, positive_q)
    if (unconstrained > 0).all():
        torch.testing.assert_close(
            super_learner_weights(get_loss("kulsif"), positive_p, positive_q), unconstrained
        )


def test_bad_options_are_config_errors() -> None:
    f_p, f_q = candidates()
    with pytest.raises(ConfigError, match="newton_steps"):
        aggregate(get_loss("kulsif"), f_p, f_q, newton_steps=0)
    with pytest.raises(ConfigError, match="'mean' or 'constant'"):
        aggregate(get_loss("lr"), f_p, f_q, reference="best")
