"""K-fold CV of a whole grid against a hand-written loop of single fits."""

from __future__ import annotations

import pytest
import torch

from litlab.core.errors import ConfigError
from litlab.methods.dre.estimators import fit_grid
from litlab.methods.dre.losses import get_loss
from litlab.methods.dre.selection import cross_validate, fold_ids
from tests.methods.dre.helpers import grid_axes, samples


def test_fold_ids_are_balanced_and_seeded() -> None:
    ids = fold_ids(23, 5, torch.Generator().manual_seed(0))
    assert sorted(torch.bincount(ids).tolist()) == [4, 4, 5, 5, 5]
    assert torch.equal(ids, fold_ids(23, 5, torch.Generator().manual_seed(0)))
    with pytest.raises(ConfigError, match="folds"):
        fold_ids(3, 5, torch.Generator())


@pytest.mark.parametrize("method", ["kulsif", "lr"])
def test_cross_validation_equals_a_loop_of_single_fits(method: str) -> None:
    x_p, x_q = samples(60, 70, separation=1.5)
    sigmas, lams = grid_axes([0.5, 2.0], [1e-2, 1.0])
    centres = x_p[:15]
    cv = cross_validate(method, x_p, x_q, centres, sigmas, lams, 3, torch.Generator().manual_seed(4))
    generator = torch.Generator().manual_seed(4)
    ids_p, ids_q = fold_ids(60, 3, generator), fold_ids(70, 3, generator)
    loss = get_loss(method)
    for k, (sigma, lam) in enumerate([(s, l) for s in sigmas for l in lams]):
        oof_p, oof_q = torch.empty(60, dtype=torch.float64), torch.empty(70, dtype=torch.float64)
        for fold in range(3):
            keep_p, keep_q = ids_p != fold, ids_q != fold
            single = fit_grid(method, x_p[keep_p], x_q[keep_q], centres, sigma[None], lam[None])
            oof_p[~keep_p], oof_q[~keep_q] = single.predict(x_p[~keep_p])[0], single.predict(x_q[~keep_q])[0]
        torch.testing.assert_close(cv.oof_p[k], oof_p)
        torch.testing.assert_close(cv.oof_q[k], oof_q)
        torch.testing.assert_close(cv.risk[k], loss.risk(loss.clip(oof_p), loss.clip(oof_q)))
