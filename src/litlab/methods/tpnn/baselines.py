"""Peers of Bayesian-TPNN from other packages (optional extra ``litlab[tpnn]``) and the p_input weights.

- BART (pymc-bart): posterior draws of f and sigma, scored like Bayesian-TPNN's (``scores.py``).
- EBM (interpret): explainable boosting with pairwise interactions (FAST finds pairs only).
- XGBoost: a black-box accuracy reference, and the paper's source of p_input (gain importance).
Each import happens inside its function, so the rest of the method runs without the extra.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np
import torch

from litlab.core.errors import ConfigError

IMPORTANCE_METHODS = ("xgboost", "gbm", "uniform")


def input_importance(
    x: torch.Tensor, y: torch.Tensor, method: str = "gbm", floor: float = 0.1, seed: int = 0
) -> torch.Tensor:
    """p_input: a boosting model's normalised gain importance mixed with a uniform floor, (p,) > 0.

    ``floor`` keeps every input proposable (a proposal must reach every state the prior allows).
    ``gbm`` is scikit-learn's gradient boosting (always available); ``xgboost`` needs the extra.
    """
    if method not in IMPORTANCE_METHODS:
        raise ConfigError(f"importance={method!r}; choose one of {IMPORTANCE_METHODS}")
    if not 0 < floor <= 1:
        raise ConfigError(f"importance floor={floor} must be in (0, 1]")
    p = x.shape[1]
    if method == "uniform":
        return torch.full((p,), 1.0 / p, dtype=torch.float64)
    xs, ys = x.double().numpy(), y.double().numpy()
    if method == "xgboost":
        import xgboost

        model = xgboost.XGBRegressor(
            n_estimators=200,
            max_depth=4,
            learning_rate=0.1,
            n_jobs=1,
            random_state=seed,
            importance_type="total_gain",
        )
    else:
        from sklearn.ensemble import GradientBoostingRegressor

        model = GradientBoostingRegressor(n_estimators=200, max_depth=4, learning_rate=0.1, random_state=seed)
    importance = torch.as_tensor(np.asarray(model.fit(xs, ys).feature_importances_, dtype=np.float64))
    importance = importance / importance.sum() if float(importance.sum()) > 0 else torch.full((p,), 1.0 / p)
    return (1 - floor) * importance + floor / p


@dataclass
class PosteriorDraws:
    """Draws of f at the test inputs ``mean: (S, n)`` and of the noise sd ``sigma: (S,)``; seconds."""

    mean: torch.Tensor
    sigma: torch.Tensor
    seconds: float


def fit_bart(
    x_train: torch.Tensor,
    y_train: torch.Tensor,
    x_test: torch.Tensor,
    trees: int = 50,
    draws: int = 500,
    tune: int = 500,
    seed: int = 0,
) -> PosteriorDraws:
    """BART (pymc-bart, one chain) with a HalfNormal(sd(y)) prior on sigma; draws at ``x_test``."""
    import time

    import pymc as pm
    import pymc_bart as pmb

    for name in ("pymc", "pymc.sampling", "pymc.stats.convergence", "pytensor"):
        logging.getLogger(name).setLevel(logging.ERROR)
    xs, ys = x_train.double().numpy(), y_train.double().numpy()
    start = time.perf_counter()
    with pm.Model():
        inputs = pm.Data("X", xs)
        mu = pmb.BART("mu", inputs, ys, m=trees)
        sigma = pm.HalfNormal("sigma", float(ys.std()))
        pm.Normal("y", mu, sigma, observed=ys, shape=mu.shape)
        trace = pm.sample(
            draws=draws,
            tune=tune,
            chains=1,
            cores=1,
            random_seed=seed,
            progressbar=False,
            compute_convergence_checks=False,
        )
        pm.set_data({"X": x_test.double().numpy()})
        predictive = pm.sample_posterior_predictive(
            trace, var_names=["mu"], random_seed=seed, progressbar=False
        )
    seconds = time.perf_counter() - start
    mean = torch.as_tensor(np.asarray(predictive.posterior_predictive["mu"])[0])
    sd = torch.as_tensor(np.asarray(trace.posterior["sigma"])[0])
    return PosteriorDraws(mean, sd, seconds)


@dataclass
class PointFit:
    """Point predictions at the test inputs, the model's term importances (if any) and seconds."""

    prediction: torch.Tensor
    terms: dict[tuple[int, ...], float]
    seconds: float


def fit_ebm(
    x_train: torch.Tensor,
    y_train: torch.Tensor,
    x_test: torch.Tensor,
    interactions: int = 10,
    outer_bags: int = 2,
    seed: int = 0,
) -> PointFit:
    """An explainable boosting machine with up to ``interactions`` pairs (FAST) and ``outer_bags`` bags
    (interpret's default is 14; fewer keeps a 2-core study in minutes); term importances."""
    import time

    from interpret.glassbox import ExplainableBoostingRegressor

    logging.getLogger("interpret").setLevel(logging.WARNING)  # its INFO lines would flood the run log
    start = time.perf_counter()
    model = ExplainableBoostingRegressor(
        interactions=interactions, outer_bags=outer_bags, n_jobs=1, random_state=seed
    )
    model.fit(x_train.double().numpy(), y_train.double().numpy())
    seconds = time.perf_counter() - start
    prediction = torch.as_tensor(model.predict(x_test.double().numpy()))
    terms = {
        tuple(int(j) for j in features): float(score)
        for features, score in zip(model.term_features_, model.term_importances(), strict=True)
    }
    return PointFit(prediction, terms, seconds)


def fit_xgboost(
    x_train: torch.Tensor, y_train: torch.Tensor, x_test: torch.Tensor, seed: int = 0
) -> PointFit:
    """XGBoost regression (400 trees of depth 4, learning rate 0.05)."""
    import time

    import xgboost

    start = time.perf_counter()
    model = xgboost.XGBRegressor(
        n_estimators=400, max_depth=4, learning_rate=0.05, n_jobs=1, random_state=seed
    )
    model.fit(x_train.double().numpy(), y_train.double().numpy())
    seconds = time.perf_counter() - start
    return PointFit(torch.as_tensor(model.predict(x_test.double().numpy())).double(), {}, seconds)
