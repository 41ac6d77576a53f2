"""The neural estimator: the batch risk is the class-balanced risk, training lowers it through the Fitter,
snapshots record the epochs asked for, the test error is the Bregman error, and bad use fails clearly."""

from __future__ import annotations

import pytest
import torch

from litlab.contract import check_pair
from litlab.core.errors import ConfigError
from litlab.datamodules.density_ratio import MixtureRatioDataModule, labelled_set
from litlab.fitting import Fitter
from litlab.methods.dre.losses import get_loss
from litlab.methods.dre.module import NeuralRatioEstimator, mlp


def small_data() -> MixtureRatioDataModule:
    return MixtureRatioDataModule(dim=3, n_p=300, n_q=500, n_test=400, batch_size=64, seed=1)


@pytest.mark.parametrize("loss", ["lr", "kulsif", "exp", "sq"])
def test_batch_risk_is_the_class_balanced_risk(loss: str) -> None:
    torch.manual_seed(0)
    model = NeuralRatioEstimator(loss=loss, hidden=(8,))
    model.bind_data({"dim": 3})
    x_p, x_q = torch.randn(30, 3), torch.randn(50, 3) + 0.5
    full = labelled_set(x_p, x_q, torch.zeros(30), torch.zeros(50)).tensors
    risk, _ = model._risk(full)
    bregman = get_loss(loss)
    with torch.no_grad():
        expected = bregman.risk(model(x_p), model(x_q))
        torch.testing.assert_close(risk.detach(), expected)


def test_training_through_the_fitter_lowers_risk_and_error_and_takes_snapshots() -> None:
    data = small_data()
    data.setup()
    model = NeuralRatioEstimator(hidden=(32, 32), lr=3e-3)
    check_pair(model, data)
    model.bind_data(data.data_spec())
    probe = data.test_set.tensors[0][:100]
    model.snapshot({"probe": probe}, epochs=[1, 8])
    fitter = Fitter()
    before = fitter.evaluate(model, data.val_dataloader(), stage="validation")
    fitter.fit(model, data, max_epochs=8, seed=0)
    after = fitter.evaluate(model, data.val_dataloader(), stage="validation")
    assert after["val/risk"] < before["val/risk"] - 0.02
    assert after["val/error"] < before["val/error"]
    assert sorted(model.snapshots) == [1, 8] and model.snapshots[8]["probe"].shape == (100,)
    test = fitter.evaluate(model, data.test_dataloader(), stage="test")
    log_beta = data.test_set.tensors[3]
    with torch.no_grad():
        expected = get_loss("lr").error(log_beta.double().exp(), model(data.test_set.tensors[0]).double())
    assert test["test/error"] == pytest.approx(float(expected), rel=1e-4)
    assert set(model.figures("test")) == {"ratio_fit"}
    assert set(model.logged_metrics()) >= {"val/risk", "test/error"}


def test_clear_errors() -> None:
    with pytest.raises(ConfigError, match="relu, silu, tanh"):
        mlp(3, [4], "gelu")
    with pytest.raises(ConfigError, match="bind_data"):
        NeuralRatioEstimator()(torch.zeros(2, 3))
    with pytest.raises(ConfigError, match="kulsif, lr, exp, sq"):
        NeuralRatioEstimator(loss="hinge")
