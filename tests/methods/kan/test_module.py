"""The Regressor's side of the model/data contract: the data decides the network's widths (bind_data)."""

from __future__ import annotations

import functools

import pytest
import torch
from hydra.utils import instantiate

from litlab import contract
from litlab.core.errors import ConfigError, LitlabError
from litlab.datamodules.feynman import FeynmanDataModule
from litlab.datamodules.functions import FunctionFitDataModule
from litlab.methods.kan.layers import build_kan
from litlab.methods.kan.module import Regressor

ADAM = functools.partial(torch.optim.Adam, lr=1e-3)


def test_bind_data_builds_the_network_from_the_data_spec() -> None:
    module = Regressor(functools.partial(build_kan, width=4, depth=1, grid_size=5, init="glorot"), ADAM)
    with pytest.raises(LitlabError, match="call bind_data"):
        module.configure_optimizers()
    data = FeynmanDataModule("f2")  # exp(-(θ-θ1)²/2σ²)/√(2πσ²): three inputs
    contract.check_pair(module, data)
    contract.bind(module, data)
    assert module.net.widths == [3, 4, 1]
    assert module(torch.zeros(7, 3)).shape == (7, 1)


def test_bind_data_refuses_widths_that_disagree_with_the_data() -> None:
    fixed = Regressor(functools.partial(build_kan, n_in=2, width=4, depth=1, grid_size=5), ADAM)
    with pytest.raises(ConfigError, match="model.net.n_in=2 but the data has n_in=3"):
        fixed.bind_data(FeynmanDataModule("f2").data_spec())
    built = Regressor(build_kan(2, 1, width=4, depth=1, grid_size=5), ADAM)
    built.bind_data(FunctionFitDataModule().data_spec())
    with pytest.raises(ConfigError, match="maps 2 -> 1 values but the data has n_in=3"):
        built.bind_data(FeynmanDataModule("f2").data_spec())


@pytest.mark.parametrize(("equation", "n_in"), [("f1", 2), ("f2", 3), ("f14", 3)])
def test_feynman_experiment_takes_its_input_width_from_the_equation(
    compose_config, equation: str, n_in: int
) -> None:
    cfg = compose_config("train", ["experiment=kan/feynman", f"data.equation={equation}"])
    assert "n_in" not in cfg.model.net, "the input width is the data's to decide"
    data = instantiate(cfg.data, _convert_="partial")
    model = instantiate(cfg.model, _convert_="partial")
    contract.bind(model, data)
    contract.check_metric(model, cfg.optimized_metric)
    assert model.net.widths == [n_in, 8, 8, 1]


def test_logged_metrics_name_what_the_module_logs() -> None:
    assert Regressor(build_kan(2, 1, 4, 1, 5), ADAM).logged_metrics() == {
        "train/loss",
        "val/loss",
        "val/rel_l2",
        "test/loss",
        "test/rel_l2",
    }
    with pytest.raises(ConfigError, match="optimized_metric='val/acc' is not logged"):
        contract.check_metric(Regressor(build_kan(2, 1, 4, 1, 5), ADAM), "val/acc")
