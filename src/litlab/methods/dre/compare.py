"""One density-ratio problem, every way of turning a grid of candidates into one estimate, and their errors.

Methods (errors are 2·E_Q B_F(β, β̂) = 2(R(f̂) − R(f*)), R(f̂) on fresh P and Q points):

- ``aggregation``: the paper's α̂, cross-fitted: a grid fitted on each half of P and Q, its α̂ from the
  other half, the two aggregates averaged (two grid fits, against CV's folds + 1);
- ``aggregation_split``: one grid fitted on the first halves, α̂ from the second (one grid fit);
- ``aggregation_same``: α̂ on the very samples the full grid was fitted on (ablation: sample reuse);
- ``cv``: K-fold CV selection; ``bma``: pseudo-BMA on CV risks; ``super_learner``: NNLS stacking;
- ``uniform``: the mean of the candidates (ablation: no Hessian solve); ``constant``: β̂ ≡ 1;
- ``oracle``: the best single candidate by true error (reference only, not an estimator).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

from litlab.datamodules.density_ratio import GaussianMixturePair
from litlab.methods.dre.aggregation import (
    aggregate,
    bma_weights,
    selection_weights,
    super_learner_weights,
    uniform_weights,
)
from litlab.methods.dre.estimators import KernelGrid, fit_grid
from litlab.methods.dre.kernels import bandwidth_grid
from litlab.methods.dre.losses import LOSSES, BregmanLoss
from litlab.methods.dre.selection import cross_validate

METHODS = (
    "aggregation",
    "aggregation_split",
    "aggregation_same",
    "cv",
    "bma",
    "super_learner",
    "uniform",
    "constant",
    "oracle",
)
BANDWIDTH_FACTORS = (0.25, 0.5, 1.0, 2.0, 4.0)
LAMBDAS = tuple(10.0**e for e in range(-6, 5))


@dataclass(frozen=True)
class RatioProblem:
    """Training rows ``x_p: (M, d)``, ``x_q: (N, d)``; fresh evaluation rows of P and Q and the Bayes risk
    R(f*) of each loss (``bayes_risk[name]``), so that errors are 2(R(f̂) − R(f*))."""

    x_p: torch.Tensor
    x_q: torch.Tensor
    eval_p: torch.Tensor
    eval_q: torch.Tensor
    bayes_risk: dict[str, float]


def mixture_problem(pair: GaussianMixturePair, n: int, n_eval: int, seed: int) -> RatioProblem:
    """``n`` draws of each of P and Q, ``n_eval`` fresh ones of each, Bayes risks (KuLSIF's exact)."""
    generator = torch.Generator().manual_seed(seed)
    x_p, x_q = pair.sample_p(n, generator), pair.sample_q(n, generator)
    eval_p, eval_q = pair.sample_p(n_eval, generator), pair.sample_q(n_eval, generator)
    beta_q = pair.log_ratio(eval_q).exp()
    bayes = {name: float(loss.bayes_risk(beta_q)) for name, loss in LOSSES.items()}
    bayes["kulsif"] = -pair.second_moment() / 2
    return RatioProblem(x_p, x_q, eval_p, eval_q, bayes)


@dataclass(frozen=True)
class GridSpec:
    """An estimator and its hyperparameter grid: bandwidths = factors × median distance, λ values."""

    method: str = "kulsif"
    n_centres: int = 200
    bandwidth_factors: Sequence[float] = BANDWIDTH_FACTORS
    lams: Sequence[float] = LAMBDAS


@dataclass
class Estimates:
    """Each method's f at the evaluation rows (``(eval_p values, eval_q values)``), every candidate's
    (``candidates``: ``(K, n)`` pairs), their labels, and the seconds each step took."""

    loss: BregmanLoss
    predictions: dict[str, tuple[torch.Tensor, torch.Tensor]]
    candidates: tuple[torch.Tensor, torch.Tensor] = field(repr=False)
    labels: list[dict[str, float]] = field(repr=False)
    seconds: dict[str, float]


def _halves(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    half = len(x) // 2
    return x[:half], x[half:]


def estimate(
    problem: RatioProblem,
    spec: GridSpec,
    folds: int = 5,
    jitter: float = 1e-3,
    newton_steps: int = 1,
    reference: str = "mean",
    seed: int = 0,
) -> Estimates:
    """Fit ``spec``'s grid on ``problem`` and turn it into one estimate by every method (see module doc)."""
    x_p, x_q = problem.x_p, problem.x_q
    sigmas = bandwidth_grid(torch.cat([x_p[:500], x_q[:500]]), list(spec.bandwidth_factors))
    lams = torch.tensor(list(spec.lams), dtype=x_p.dtype)
    seconds, weights, predictions = {}, {}, {}

    def fit(rows_p: torch.Tensor, rows_q: torch.Tensor) -> KernelGrid:
        return fit_grid(spec.method, rows_p, rows_q, rows_p[: spec.n_centres], sigmas, lams)

    def evaluate(fitted: KernelGrid) -> tuple[torch.Tensor, torch.Tensor]:
        return fitted.predict(problem.eval_p), fitted.predict(problem.eval_q)

    def combine(fitted: KernelGrid, rows_p: torch.Tensor, rows_q: torch.Tensor) -> tuple[torch.Tensor, ...]:
        alpha = aggregate(
            fitted.loss, fitted.predict(rows_p), fitted.predict(rows_q), jitter, newton_steps, reference
        )
        return tuple(alpha @ f for f in evaluate(fitted))

    start = time.perf_counter()
    grid = fit(x_p, x_q)
    f_train = grid.predict(x_p), grid.predict(x_q)
    seconds["fit_grid"] = time.perf_counter() - start
    loss = grid.loss
    f_eval = evaluate(grid)

    start = time.perf_counter()
    alpha = aggregate(loss, *f_train, jitter, newton_steps, reference)
    seconds["aggregate"] = time.perf_counter() - start
    predictions["aggregation_same"] = tuple(alpha @ f for f in f_eval)

    (p_a, p_b), (q_a, q_b) = _halves(x_p), _halves(x_q)
    predictions["aggregation_split"] = combine(fit(p_a, q_a), p_b, q_b)
    other = combine(fit(p_b, q_b), p_a, q_a)
    predictions["aggregation"] = tuple((a + b) / 2 for a, b in zip(predictions["aggregation_split"], other))

    start = time.perf_counter()
    centres = x_p[: spec.n_centres]
    cv = cross_validate(
        spec.method, x_p, x_q, centres, sigmas, lams, folds, torch.Generator().manual_seed(seed)
    )
    weights["cv"] = selection_weights(cv.risk)
    seconds["cv"] = time.perf_counter() - start
    weights["bma"] = bma_weights(cv.risk, (len(x_p) + len(x_q)) / 2)
    weights["super_learner"] = super_learner_weights(loss, cv.oof_p, cv.oof_q, jitter)
    weights["uniform"] = uniform_weights(grid.size, x_p.dtype)
    predictions |= {name: (w @ f_eval[0], w @ f_eval[1]) for name, w in weights.items()}
    predictions["constant"] = tuple(loss.inverse_link(torch.ones_like(f[0])) for f in f_eval)
    return Estimates(loss, predictions, f_eval, grid.labels(), seconds)


def compare(problem: RatioProblem, spec: GridSpec, **options: float | int | str) -> dict[str, float]:
    """The error 2(R(f̂) − R(f*)) of every method of :data:`METHODS` on ``problem`` (options: as for
    :func:`estimate`); ``oracle`` is the best candidate's."""
    result = estimate(problem, spec, **options)
    loss, bayes = result.loss, problem.bayes_risk[result.loss.name]
    errors = {name: float(loss.risk_error(*f, bayes)) for name, f in result.predictions.items()}
    errors["oracle"] = float(loss.risk_error(*result.candidates, bayes).min())
    return {name: errors[name] for name in METHODS}
