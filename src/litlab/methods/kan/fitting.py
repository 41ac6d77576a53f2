"""The paper's function-fitting protocol through the project's one fitter: full-batch Adam on MSE, then the
relative L2 error on an evaluation grid. Used by the study, the NTK task and the claim test."""

from __future__ import annotations

import functools

import torch
from torch import Tensor, nn

from litlab.datamodules.base import TensorBatchDataset, batch_loader
from litlab.fitting import FitResult, Fitter
from litlab.methods.kan.module import Regressor, relative_l2


def full_batch_loader(x: Tensor, y: Tensor) -> torch.utils.data.DataLoader:
    """One batch holding all of (x, y), unshuffled: each epoch is one optimizer step (the paper's setting)."""
    return batch_loader(TensorBatchDataset(x, y), len(x), shuffle=False, seed=0, num_workers=0)


def fit_full_batch(
    fitter: Fitter, module: Regressor, x: Tensor, y: Tensor, epochs: int, seed: int | None = None
) -> FitResult:
    """Train ``module`` for ``epochs`` full-batch steps on (x, y) with its own optimizer; returns the fit.

    Equals the hand-written loop ``zero_grad; mse(net(x), y).backward(); step`` bit for bit
    (tests/methods/kan/test_fitting.py).
    """
    return fitter.fit(module, full_batch_loader(x, y), max_steps=epochs, seed=seed)


def regressor(net: nn.Module, lr: float = 1e-3) -> Regressor:
    """``net`` wrapped for fitting with Adam at ``lr`` (the paper: 1e-3), no scheduler."""
    return Regressor(net, functools.partial(torch.optim.Adam, lr=lr))


@torch.no_grad()
def test_error(net: nn.Module, x: Tensor, y: Tensor) -> float:
    """Relative L2 of ``net`` on (x, y), evaluated in one batch on the network's device."""
    device = next(net.parameters()).device
    return relative_l2(net(x.to(device)), y.to(device)).item()
