"""The paper's claim at CI size: aggregating a KuLSIF grid (5 bandwidths × 11 λ) is at least as good as
5-fold CV selection in most settings, its error falls with n at about the rate of the best single candidate
(the oracle), and the uniform mean of the same candidates (the ablation without the Hessian solve) is worse.

Setting: 3-component Gaussian mixtures (separation 1.5) against N(0, I) in 20 and 50 dimensions,
n ∈ {500, 1000, 2000} per distribution, error 2(R(f̂) − R(f*)) from 5000 fresh P and Q draws (KuLSIF's R(f*)
exact). The aggregation is cross-fitted (two half-sample grids) with jitter 1e-3, as in the study.
Margins come from tuning seeds 100-103 (these tests use 7000-7002): aggregation ≤ CV in 5 of 6 settings
(mean over seeds) and 19 of 24 runs; log-log slopes over n (mean curves) aggregation −0.113/−0.110 against
oracle −0.125/−0.083 (per-seed |difference| ≤ 0.052); the uniform mean 0.26-0.74 above aggregation in every
setting with slopes +0.08/+0.04. The claim does not hold in 2-D with this grid (near-interpolating
candidates make the least-squares weights heavy-tailed): there CV beat the aggregate on every tuning seed,
by orders of magnitude, and the last test asserts that.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

from litlab.datamodules.density_ratio import GaussianMixturePair
from litlab.methods.dre.compare import GridSpec, compare, mixture_problem

SEEDS = (7000, 7001, 7002)
DIMS = (20, 50)
NS = (500, 1000, 2000)


@functools.cache
def errors(dim: int, n: int, seed: int) -> dict[str, float]:
    return compare(
        mixture_problem(GaussianMixturePair(dim, 3, 1.5), n, 5000, seed), GridSpec("kulsif"), seed=seed
    )


def mean_error(dim: int, n: int, method: str) -> float:
    return float(np.mean([errors(dim, n, seed)[method] for seed in SEEDS]))


def slope(dim: int, method: str) -> float:
    return float(np.polyfit(np.log(NS), np.log([mean_error(dim, n, method) for n in NS]), 1)[0])


@pytest.mark.slow
def test_aggregation_is_at_least_as_good_as_cv_in_most_settings() -> None:
    settings = [(d, n) for d in DIMS for n in NS]
    wins = [mean_error(d, n, "aggregation") <= mean_error(d, n, "cv") for d, n in settings]
    runs = [errors(d, n, s)["aggregation"] <= errors(d, n, s)["cv"] for d, n in settings for s in SEEDS]
    table = {
        (d, n): (round(mean_error(d, n, "aggregation"), 3), round(mean_error(d, n, "cv"), 3))
        for d, n in settings
    }
    print("aggregation vs cv (mean error):", table, "run share:", np.mean(runs))
    assert sum(wins) >= 4, table
    assert np.mean(runs) >= 0.6, table


@pytest.mark.slow
def test_error_falls_at_the_oracle_rate_and_the_uniform_mean_does_not() -> None:
    for dim in DIMS:
        slopes = {m: slope(dim, m) for m in ("aggregation", "oracle", "uniform")}
        print(dim, slopes)
        assert slopes["aggregation"] < 0, slopes
        assert abs(slopes["aggregation"] - slopes["oracle"]) <= 0.1, slopes
        assert slopes["uniform"] > slopes["aggregation"] + 0.1, slopes
        for n in NS:
            assert mean_error(dim, n, "uniform") > mean_error(dim, n, "aggregation") + 0.1


@pytest.mark.slow
def test_in_two_dimensions_cv_beats_the_aggregate_of_the_full_grid() -> None:
    for seed in SEEDS[:2]:
        result = errors(2, 1000, seed)
        assert result["cv"] < result["aggregation"], result
