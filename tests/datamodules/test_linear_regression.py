"""Gaussian linear-regression data: the power-law spectrum, the sample moments, the spec and the loaders."""

from __future__ import annotations

import pytest
import torch

from litlab.datamodules.linear_regression import (
    LinearRegressionDataModule,
    power_law_spectrum,
    sample_linear_regression,
)


def test_spectrum_is_i_to_the_minus_a() -> None:
    spectrum = power_law_spectrum(4, 2.0)
    assert torch.equal(spectrum, torch.tensor([1.0, 1 / 4, 1 / 9, 1 / 16], dtype=torch.float64))
    assert power_law_spectrum(3, 1.5, torch.float32).dtype == torch.float32
    with pytest.raises(ValueError, match="dim"):
        power_law_spectrum(0, 2.0)
    with pytest.raises(ValueError, match="exponent"):
        power_law_spectrum(3, 0.0)


def test_samples_have_the_covariance_and_the_noise_asked_for() -> None:
    spectrum = power_law_spectrum(5, 1.0)
    w_star = torch.linspace(-1, 1, 5, dtype=torch.float64)
    x, y = sample_linear_regression(200_000, spectrum, w_star, 0.5, torch.Generator().manual_seed(0))
    covariance = x.T @ x / len(x)
    # sd of a sample variance λ²·sqrt(2/n) ≈ 0.003λ; of a covariance sqrt(λ_iλ_j/n) ≈ 0.0022
    assert torch.allclose(covariance.diagonal(), spectrum, rtol=0.015)
    assert (covariance - torch.diag(covariance.diagonal())).abs().max() < 0.012
    residual = y - x @ w_star
    assert abs(residual.var().item() - 0.25) < 0.005
    assert abs((residual[:, None] * x).mean(0)).max() < 0.01  # the noise is independent of x


def test_datamodule_spec_sets_and_one_pass_loader() -> None:
    data = LinearRegressionDataModule(dim=6, n_train=40, n_val=8, n_test=9, batch_size=4, seed=3)
    spec = data.data_spec()
    assert spec["dim"] == 6 and spec["batch_size"] == 4 and spec["exponent"] == 2.0
    assert torch.equal(spec["spectrum"], power_law_spectrum(6, 2.0))
    assert torch.equal(spec["w_star"], torch.ones(6, dtype=torch.float64))
    data.setup("fit")
    batches = list(data.train_dataloader())
    assert len(batches) == 10 and batches[0][0].shape == (4, 6) and batches[0][1].shape == (4,)
    x = torch.cat([b[0] for b in batches])
    assert torch.equal(x, data.train_set.tensors[0])  # read once, in the drawn order
    assert next(iter(data.val_dataloader()))[0].shape == (8, 6)
    again = LinearRegressionDataModule(dim=6, n_train=40, n_val=8, n_test=9, batch_size=4, seed=3)
    again.setup("fit")
    assert torch.equal(again.test_set.tensors[1], data.test_set.tensors[1])


def test_bad_arguments_are_one_line_errors() -> None:
    with pytest.raises(ValueError, match="dtype"):
        LinearRegressionDataModule(dtype="float16")
    with pytest.raises(ValueError, match="noise_std"):
        LinearRegressionDataModule(noise_std=-1.0)
    with pytest.raises(ValueError, match="positive"):
        LinearRegressionDataModule(n_val=0)
