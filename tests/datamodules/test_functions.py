"""The five 2-D targets against mpmath, seeded sampling, splits, the evaluation grid and the loaders."""

from __future__ import annotations

import lightning as L
import mpmath
import numpy as np
import pytest
import torch
from torch import nn

from litlab.datamodules.functions import (
    ALIASES,
    FUNCTIONS,
    FunctionFitDataModule,
    get_function,
    uniform_grid,
)

POINTS = [(0.3, -0.5), (-0.9, 0.8), (0.75, 0.25), (-0.2, -0.95)]


def _oracle(name: str, x: float, y: float) -> float:
    """The official formulas, evaluated independently with mpmath at 30 digits."""
    mpmath.mp.dps = 30
    x, y = mpmath.mpf(x), mpmath.mpf(y)
    f3 = mpmath.besseli(1, x) + mpmath.exp(mpmath.exp(-abs(y)) * mpmath.besseli(1, y)) + mpmath.sin(x * y)
    if name == "f1":
        return float(x * y)
    if name == "f2":
        return float(mpmath.exp(mpmath.sin(mpmath.pi * x) + y**2))
    if name == "f3":
        return float(f3)
    if name == "f4":
        z = f3 + mpmath.erfinv(y)
        return float(mpmath.fresnels(z) * mpmath.fresnelc(z))
    xy = x * y
    return float(y * (1 if x < 0.5 else -1) + mpmath.erf(x) * (xy if xy < 1 else 1 / xy))


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_targets_match_independent_formulas(name: str) -> None:
    values = get_function(name)(np.array(POINTS))
    assert values.shape == (len(POINTS), 1)
    expected = [_oracle(name, x, y) for x, y in POINTS]
    np.testing.assert_allclose(values[:, 0], expected, rtol=1e-12, atol=1e-14)


def test_piecewise_and_fresnel_edges() -> None:
    # f5 flips the sign of its y term at x = 0.5; f4 is S*C at z = +-inf (erfinv(+-1)), i.e. 1/4.
    f5 = get_function("erf_piecewise")(np.array([[0.49, 0.3], [0.5, 0.3]]))[:, 0]
    np.testing.assert_allclose(f5, [_oracle("f5", 0.49, 0.3), _oracle("f5", 0.5, 0.3)], rtol=1e-12)
    assert f5[0] - f5[1] == pytest.approx(0.6, abs=0.01)
    edges = get_function("f4")(np.array([[0.2, 1.0], [-0.7, -1.0]]))
    np.testing.assert_allclose(edges[:, 0], [0.25, 0.25])


def test_registry_aliases_and_unknown_name() -> None:
    assert set(ALIASES) == {"product", "exp_sin", "bessel", "fresnel", "erf_piecewise"}
    for alias, key in ALIASES.items():
        assert get_function(alias) is get_function(key)
    with pytest.raises(ValueError, match="f1 .*f5"):
        get_function("f6")


def _data(**kwargs: object) -> FunctionFitDataModule:
    dm = FunctionFitDataModule(**kwargs)
    dm.setup("fit")
    return dm


def test_sampling_is_seeded_split_disjoint_and_float32() -> None:
    a, b, c = _data(seed=3), _data(seed=3), _data(seed=4)
    xa, ya = a.train_set.tensors
    assert xa.dtype == ya.dtype == torch.float32
    assert (len(a.train_set), len(a.val_set)) == (4000, 1000)
    assert torch.equal(xa, b.train_set.tensors[0]) and torch.equal(a.val_set.tensors[1], b.val_set.tensors[1])
    assert not torch.equal(xa, c.train_set.tensors[0])
    assert xa.min() >= -1 and xa.max() <= 1
    xv = a.val_set.tensors[0]
    assert torch.cdist(xa, xv).min() > 0  # no validation point is also a training point
    # targets are computed from the stored float32 inputs
    np.testing.assert_allclose(ya.numpy(), get_function("f2")(xa.double().numpy()), rtol=1e-6)


def test_evaluation_grid_default_and_configurable() -> None:
    assert len(_data().test_set) == 200**2
    dm = _data(function="f1", grid_resolution=5)
    grid, values = dm.test_set.tensors
    np.testing.assert_array_equal(grid, uniform_grid(5))
    assert torch.equal(grid[:5, 1], torch.full((5,), -1.0))  # first coordinate varies fastest
    torch.testing.assert_close(values[:, 0], grid[:, 0] * grid[:, 1])


def test_full_batch_and_seeded_minibatches() -> None:
    full = _data(batch_size=None)
    batches = list(full.train_dataloader())
    assert len(batches) == 1 and batches[0][0].shape == (4000, 2) and batches[0][1].shape == (4000, 1)
    assert torch.equal(batches[0][0], full.train_set.tensors[0])
    orders = [torch.cat([x for x, _ in _data(batch_size=1000).train_dataloader()]) for _ in range(2)]
    assert torch.equal(orders[0], orders[1])
    assert not torch.equal(orders[0], full.train_set.tensors[0])
    assert len(list(_data(eval_batch_size=10_000).test_dataloader())) == 4


def test_bad_split_is_rejected() -> None:
    with pytest.raises(ValueError, match="empty train or val"):
        FunctionFitDataModule(n_samples=10, train_fraction=1.0)


class _Fit(L.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Linear(2, 1)

    def training_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> torch.Tensor:
        x, y = batch
        assert x.shape == (4000, 2)
        return nn.functional.mse_loss(self.net(x), y)

    def validation_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> None:
        assert batch[0].shape == (1000, 2)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.Adam(self.parameters(), 1e-3)


def test_lightning_fit_uses_full_batch(tmp_path: object) -> None:
    trainer = L.Trainer(
        fast_dev_run=1, accelerator="cpu", logger=False, enable_progress_bar=False, default_root_dir=tmp_path
    )
    trainer.fit(_Fit(), datamodule=FunctionFitDataModule(function="f3", grid_resolution=20))


def test_data_spec_gives_the_model_its_widths() -> None:
    assert FunctionFitDataModule(function="f5").data_spec() == {"n_in": 2, "n_out": 1}


def test_steps_per_epoch_repeats_the_full_batch() -> None:
    dm = _data(batch_size=None, steps_per_epoch=3)
    batches = list(dm.train_dataloader())
    assert len(batches) == 3
    assert all(
        torch.equal(x, dm.train_set.tensors[0]) and torch.equal(y, dm.train_set.tensors[1])
        for x, y in batches
    )
    with pytest.raises(ValueError, match="only for full batches"):
        FunctionFitDataModule(batch_size=100, steps_per_epoch=3)
