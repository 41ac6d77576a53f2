"""Density-ratio data: the mixture ratio and E_Q β² against scipy and Monte Carlo, the covariate-shift split's
ratio normalisation, and the P-vs-Q loaders (labels, class-balancing weights, splits, errors)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy.stats import multivariate_normal

from litlab.core.errors import ConfigError
from litlab.datamodules.density_ratio import (
    GaussianMixturePair,
    MixtureRatioDataModule,
    ShiftRatioDataModule,
    covariate_shift_split,
    labelled_set,
)


def test_log_ratio_matches_scipy_densities() -> None:
    pair = GaussianMixturePair(dim=3, n_components=2, separation=1.2, scale=0.8, geometry_seed=4)
    x = torch.randn(50, 3, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    means = pair.means.numpy()
    p = np.mean([multivariate_normal(mu, 0.64 * np.eye(3)).pdf(x.numpy()) for mu in means], axis=0)
    q = multivariate_normal(np.zeros(3), np.eye(3)).pdf(x.numpy())
    np.testing.assert_allclose(pair.log_ratio(x).numpy(), np.log(p / q), rtol=1e-10)
    np.testing.assert_allclose(np.linalg.norm(means, axis=1), 1.2)
    assert pair.name == "c2,d1.20,dim3"


@pytest.mark.parametrize("scale", [0.8, 1.0, 1.1])  # E_Q β³ finite (s² < 1.5): tight MC
def test_second_moment_and_mean_of_the_ratio(scale: float) -> None:
    pair = GaussianMixturePair(dim=2, n_components=3, separation=0.7, scale=scale)
    generator = torch.Generator().manual_seed(1)
    beta_q = pair.log_ratio(pair.sample_q(400_000, generator)).exp()
    beta_p = pair.log_ratio(pair.sample_p(400_000, generator)).exp()
    assert float(beta_q.mean()) == pytest.approx(1.0, abs=0.01)
    # E_Q β² = E_P β: two Monte Carlo estimates of the closed form
    assert float(beta_p.mean()) == pytest.approx(pair.second_moment(), rel=0.01)
    assert float(beta_q.square().mean()) == pytest.approx(pair.second_moment(), rel=0.03)


def test_mixture_pair_rejects_an_infinite_second_moment() -> None:
    with pytest.raises(ConfigError, match="sqrt"):
        GaussianMixturePair(dim=2, scale=1.5)
    with pytest.raises(ConfigError, match="dim"):
        GaussianMixturePair(dim=0)


@pytest.mark.parametrize("dataset", ["diabetes", "friedman1"])
def test_shift_split_ratio_is_normalised_on_the_pool(dataset: str) -> None:
    split = covariate_shift_split(dataset, shift=2.0, seed=3)
    n_pool = len(split.x_source) + len(split.x_target)
    assert n_pool == (442 if dataset == "diabetes" else 1000)
    # with the pool as population, E_pool[s·β] = s̄: the mean of β over the source is 1 in expectation over
    # the split; the realised mean is close
    assert float(split.log_beta_source.exp().mean()) == pytest.approx(1.0, abs=0.25)
    # the target sits where the source is thin: its ratios are larger on average
    assert split.log_beta_target.mean() > split.log_beta_source.mean()
    with pytest.raises(ConfigError, match="diabetes, friedman1"):
        covariate_shift_split("iris")


def test_labelled_set_weights_give_the_class_balanced_mean() -> None:
    data = labelled_set(torch.ones(3, 2), torch.zeros(5, 2), torch.zeros(3), torch.zeros(5))
    x, label, weight, _ = data.tensors
    assert label.tolist() == [1, 1, 1, -1, -1, -1, -1, -1]
    values = torch.where(label > 0, torch.tensor(2.0), torch.tensor(7.0))
    assert float((weight * values).mean()) == pytest.approx(2.0 + 7.0)


def test_mixture_datamodule_splits_and_loaders() -> None:
    data = MixtureRatioDataModule(dim=4, n_p=100, n_q=150, n_test=60, val_fraction=0.2, batch_size=32, seed=2)
    assert data.data_spec() == {"dim": 4, "n_train": 80 + 120}
    x, label, weight, log_beta = next(iter(data.train_dataloader()))
    assert x.shape == (32, 4) and x.dtype == torch.float32 and set(label.tolist()) <= {-1.0, 1.0}
    test = next(iter(data.test_dataloader()))
    assert len(test[0]) == 60 and (test[1] == -1).all()
    np.testing.assert_allclose(
        test[3].numpy(), data.pair.log_ratio(test[0].double()).numpy(), rtol=1e-4, atol=1e-4
    )
    again = MixtureRatioDataModule(dim=4, n_p=100, n_q=150, n_test=60, batch_size=32, seed=2)
    again.setup()
    assert torch.equal(again.val_set.tensors[0], data.val_set.tensors[0])
    with pytest.raises(ConfigError, match="val_fraction"):
        MixtureRatioDataModule(val_fraction=1.0)


def test_shift_datamodule_full_batch() -> None:
    data = ShiftRatioDataModule(dataset="diabetes", seed=0)
    spec = data.data_spec()
    assert spec["dim"] == 10 and data.batch_size == spec["n_train"]
    batch = next(iter(data.train_dataloader()))
    assert len(batch[0]) == spec["n_train"] and torch.isfinite(batch[3]).all()
