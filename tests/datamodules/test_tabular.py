"""Tabular data: seeded splits, scaling, true components, and the offline real sets."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from litlab.core.errors import ConfigError, LitlabError
from litlab.datamodules.tabular import SYNTHETIC, TabularDataModule, load_tabular, pure3


def test_synthetic_splits_are_seeded_and_sized() -> None:
    a, b = load_tabular("planted3", 500, 12, seed=3), load_tabular("planted3", 500, 12, seed=3)
    c = load_tabular("planted3", 500, 12, seed=4)
    assert torch.equal(a.x_train, b.x_train) and not torch.equal(a.x_train, c.x_train)
    assert (len(a.y_train), len(a.y_val), len(a.y_test)) == (300, 100, 100)
    assert a.x_train.shape[1] == 12 and (5, 6, 7) in a.components
    residual = a.y_test - a.f_test
    assert 0.8 < float(residual.std()) < 1.2


def test_pure3_has_no_lower_order_projections() -> None:
    """Every main effect and pairwise projection of the planted term is zero (on a product grid of
    x5, x6, x7; the term depends on nothing else)."""
    axis = np.linspace(0, 1, 11)
    grid = np.zeros((11**3, 8))
    grid[:, 5:] = np.stack(np.meshgrid(axis, axis, axis, indexing="ij"), -1).reshape(-1, 3)
    cube = (pure3(grid) - SYNTHETIC["friedman1"].function(grid)).reshape(11, 11, 11)
    assert abs(cube.mean()) < 1e-10 and cube.std() > 1
    for keep in [(0,), (1,), (2,), (0, 1), (0, 2), (1, 2)]:
        others = tuple(i for i in range(3) if i not in keep)
        assert np.allclose(cube.mean(axis=others), 0, atol=1e-10)


def test_the_datamodule_scales_inputs_and_standardises_the_response() -> None:
    data = TabularDataModule("friedman1", n_samples=200, n_features=6, seed=0)
    spec = data.data_spec()
    data.setup("fit")
    x, y = data.train_set.tensors
    assert spec["n_features"] == 6 and spec["n_train"] == 120 and [0, 1] in spec["components"]
    assert float(x.min()) == 0.0 and float(x.max()) == 1.0
    assert abs(float(y.mean())) < 1e-5 and abs(float(y.std()) - 1) < 1e-4
    batch = next(iter(data.train_dataloader()))
    assert batch[0].shape == (120, 6) and batch[1].shape == (120, 1)


def test_diabetes_loads_offline_and_replaces_boston() -> None:
    splits = load_tabular("diabetes", seed=0)
    assert (
        splits.x_train.shape[1] == 10 and len(splits.y_train) + len(splits.y_val) + len(splits.y_test) == 442
    )
    assert splits.components == ()


def test_missing_california_and_bad_names_are_clear_errors(tmp_path) -> None:
    with pytest.raises(LitlabError, match="california housing is not in scikit-learn's data folder"):
        load_tabular("california", data_home=str(tmp_path))
    with pytest.raises(ConfigError, match="unknown tabular set 'boston'"):
        TabularDataModule("boston")
    with pytest.raises(ConfigError, match="planted3 uses 8 inputs"):
        load_tabular("planted3", n_features=5)
