"""The delegation regression against scikit-learn's unpenalised fit and an autograd Hessian."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from sklearn.linear_model import LogisticRegression

from litlab.core.errors import LitlabError
from litlab.methods.metacog.analysis import bootstrap, delegation_regression, design, irls, logit


def _data(n: int = 400, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = np.column_stack([np.ones(n), rng.standard_normal((n, 3))])
    y = (rng.random(n) < 1 / (1 + np.exp(-(x @ np.array([0.3, -1.0, 0.5, 0.0]))))).astype(float)
    return x, y


def test_irls_matches_scikit_learn_and_the_autograd_hessian() -> None:
    x, y = _data()
    fit = logit(x, y, ["const", "a", "b", "c"])
    reference = LogisticRegression(C=np.inf, fit_intercept=False, tol=1e-10, max_iter=1000).fit(x, y)
    np.testing.assert_allclose(fit.coef, reference.coef_[0], atol=1e-4)
    beta = torch.tensor(fit.coef, requires_grad=True)
    xt, yt = torch.tensor(x), torch.tensor(y)
    hessian = torch.autograd.functional.hessian(
        lambda b: torch.nn.functional.binary_cross_entropy_with_logits(xt @ b, yt, reduction="sum"), beta
    )
    np.testing.assert_allclose(fit.se, np.sqrt(np.diag(torch.linalg.inv(hessian).numpy())), rtol=1e-4)
    assert fit.converged and fit.p[3] > 0.01 and fit.p[1] < 1e-6


def test_batched_weighted_fits_equal_fits_on_repeated_rows() -> None:
    x, y = _data(120, 1)
    counts = np.random.default_rng(2).multinomial(120, np.full(120, 1 / 120), size=3).astype(float)
    batched, _, _ = irls(x, y, counts)
    for b in range(3):
        rows = np.repeat(np.arange(120), counts[b].astype(int))
        single, _, _ = irls(x[rows], y[rows])
        np.testing.assert_allclose(batched[b], single[0], atol=1e-6)
    low, high = bootstrap(x, y, 1, 200, 0)
    assert low < logit(x, y, list("kabc")).coef[1] < high


def test_design_turns_digits_into_categories_and_drops_constant_controls() -> None:
    digits = np.array([1, 2, 3, 1, 2, 3])
    x, names = design(np.arange(6.0), {"flat": np.ones(6), "length": np.arange(6.0) ** 2}, digits)
    assert names == ["const", "signal", "length", "digits=2", "digits=3"]
    np.testing.assert_array_equal(x[:, 3], digits == 2)
    np.testing.assert_allclose(x[:, 1].mean(), 0, atol=1e-12)


def test_regression_refuses_one_sided_choices() -> None:
    with pytest.raises(LitlabError, match="both choices"):
        delegation_regression(np.zeros(50, bool), np.linspace(0, 1, 50), {}, None)
