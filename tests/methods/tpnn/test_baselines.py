"""p_input weights, and the optional peers (BART, EBM, XGBoost) where litlab[tpnn] is installed."""

from __future__ import annotations

import pytest
import torch

from litlab.core.errors import ConfigError
from litlab.datamodules.tabular import load_tabular
from litlab.methods.tpnn.baselines import fit_bart, fit_ebm, fit_xgboost, input_importance


def test_importance_weights_find_the_active_inputs_and_keep_a_floor() -> None:
    splits = load_tabular("friedman1", 400, 8, seed=0)
    weights = input_importance(splits.x_train, splits.y_train, "gbm", floor=0.2)
    assert float(weights.sum()) == pytest.approx(1.0) and float(weights.min()) >= 0.2 / 8
    assert set(weights.argsort(descending=True)[:4].tolist()) <= {0, 1, 2, 3, 4}
    assert torch.allclose(
        input_importance(splits.x_train, splits.y_train, "uniform"),
        torch.full((8,), 1 / 8, dtype=torch.float64),
    )
    with pytest.raises(ConfigError, match="importance='shap'"):
        input_importance(splits.x_train, splits.y_train, "shap")


def test_xgboost_importance_and_fit() -> None:
    pytest.importorskip("xgboost")
    splits = load_tabular("friedman1", 400, 8, seed=0)
    weights = input_importance(splits.x_train, splits.y_train, "xgboost")
    assert int(weights.argmax()) in {0, 1, 3}
    fit = fit_xgboost(splits.x_train, splits.y_train, splits.x_test)
    assert float((fit.prediction - splits.f_test).square().mean().sqrt()) < 2.5


def test_ebm_fits_and_reports_pairwise_terms() -> None:
    pytest.importorskip("interpret")
    splits = load_tabular("friedman1", 400, 6, seed=0)
    fit = fit_ebm(splits.x_train, splits.y_train, splits.x_test, interactions=3)
    assert float((fit.prediction - splits.f_test).square().mean().sqrt()) < 2.5
    assert max(len(t) for t in fit.terms) == 2  # FAST finds pairs only


@pytest.mark.slow
def test_bart_gives_posterior_draws() -> None:
    pytest.importorskip("pymc_bart")
    splits = load_tabular("friedman1", 300, 6, seed=0)
    draws = fit_bart(splits.x_train, splits.y_train, splits.x_test, trees=20, draws=100, tune=100)
    assert draws.mean.shape == (100, len(splits.y_test)) and draws.sigma.shape == (100,)
    assert float((draws.mean.mean(0) - splits.f_test).square().mean().sqrt()) < 3.0
