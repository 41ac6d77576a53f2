"""CRPS, quantiles, calibration and selection AUROC against numerical and library references."""

from __future__ import annotations

import math

import pytest
import torch
from scipy import integrate, stats
from sklearn.metrics import roc_auc_score

from litlab.methods.tpnn.scores import (
    calibration_error,
    mixture_cdf,
    mixture_crps,
    mixture_quantiles,
    selection_auroc,
)


def test_crps_of_a_mixture_matches_numerical_integration() -> None:
    mean = torch.tensor([[0.0, 1.0], [1.5, -1.0], [0.3, 2.0]], dtype=torch.float64)
    sigma = torch.tensor([0.5, 1.0, 0.8], dtype=torch.float64)
    y = torch.tensor([0.4, 0.2], dtype=torch.float64)
    crps = mixture_crps(mean, sigma, y)
    for i in range(2):

        def cdf(z: float, i: int = i) -> float:
            return sum(stats.norm.cdf(z, float(m), float(s)) for m, s in zip(mean[:, i], sigma)) / 3

        below = integrate.quad(lambda z: cdf(z) ** 2, -20, float(y[i]))[0]
        above = integrate.quad(lambda z: (1 - cdf(z)) ** 2, float(y[i]), 20)[0]
        assert float(crps[i]) == pytest.approx(below + above, rel=1e-6)


def test_crps_of_one_gaussian_is_the_closed_form() -> None:
    z = 0.7
    expected = 2.0 * (z * (2 * stats.norm.cdf(z) - 1) + 2 * stats.norm.pdf(z) - 1 / math.sqrt(math.pi))
    f64 = torch.float64
    value = mixture_crps(
        torch.tensor([[0.0]], dtype=f64), torch.tensor([2.0], dtype=f64), torch.tensor([1.4], dtype=f64)
    )
    assert float(value) == pytest.approx(expected, rel=1e-10)


def test_quantiles_and_pit() -> None:
    q = mixture_quantiles(torch.tensor([[1.0, -2.0]]), torch.tensor([0.5]), [0.05, 0.5, 0.95])
    expected = torch.tensor([[stats.norm.ppf(p, m, 0.5) for m in (1.0, -2.0)] for p in (0.05, 0.5, 0.95)])
    assert torch.allclose(q, expected.double(), atol=1e-9)
    pit = mixture_cdf(torch.zeros(2, 3), torch.ones(2), torch.tensor([0.0, 1.0, -1.0]))
    assert torch.allclose(
        pit, torch.tensor([0.5, stats.norm.cdf(1), stats.norm.cdf(-1)], dtype=torch.float64)
    )


def test_calibration_error_is_zero_for_uniform_pit_and_large_for_overconfidence() -> None:
    uniform = (torch.arange(10000, dtype=torch.float64) + 0.5) / 10000
    assert calibration_error(uniform) < 1e-3
    overconfident = torch.where(uniform < 0.5, uniform * 0.2, 1 - (1 - uniform) * 0.2)
    assert calibration_error(overconfident) > 0.2


def test_selection_auroc_matches_sklearn_on_all_subsets() -> None:
    from itertools import combinations

    p = 6
    scores = {(0, 1): 0.9, (2, 3): 0.5, (1, 4): 0.5, (0, 5): 0.1}
    truth = [(0, 1), (2, 3), (3,)]
    subsets = list(combinations(range(p), 2))
    labels = [int(s in truth) for s in subsets]
    values = [scores.get(s, 0.0) for s in subsets]
    assert selection_auroc(scores, truth, p, 2) == pytest.approx(roc_auc_score(labels, values))
    assert math.isnan(selection_auroc(scores, truth, p, 3))
