"""K-fold cross-validation of a whole estimator grid: held-out risks and out-of-fold predictions.

P and Q are split into folds separately; each fold refits the grid on the other folds (same centres and
bandwidths) and predicts its own rows. The pooled held-out risk mean_P ℓ(+1, f̃) + mean_Q ℓ(−1, f̃), on
predictions clipped to the link's domain, is the CV score of every candidate.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from litlab.core.errors import ConfigError
from litlab.methods.dre.estimators import METHOD_LOSS, fit_grid
from litlab.methods.dre.losses import get_loss


@dataclass
class CrossValidation:
    """Held-out risk per candidate ``(K,)``; out-of-fold predictions ``oof_p: (K, M)``, ``oof_q: (K, N)``."""

    risk: torch.Tensor
    oof_p: torch.Tensor
    oof_q: torch.Tensor


def fold_ids(n: int, folds: int, generator: torch.Generator) -> torch.Tensor:
    """A seeded assignment of ``n`` rows to ``folds`` folds of sizes differing by at most one."""
    if not 2 <= folds <= n:
        raise ConfigError(f"folds must be in [2, {n}] for {n} rows, got {folds}")
    return torch.randperm(n, generator=generator) % folds


def cross_validate(
    method: str,
    x_p: torch.Tensor,
    x_q: torch.Tensor,
    centres: torch.Tensor,
    sigmas: torch.Tensor,
    lams: torch.Tensor,
    folds: int,
    generator: torch.Generator,
) -> CrossValidation:
    """``folds``-fold CV of :func:`~litlab.methods.dre.estimators.fit_grid` over the whole grid."""
    ids_p, ids_q = fold_ids(len(x_p), folds, generator), fold_ids(len(x_q), folds, generator)
    oof_p = oof_q = None
    for fold in range(folds):
        held_p, held_q = ids_p == fold, ids_q == fold
        grid = fit_grid(method, x_p[~held_p], x_q[~held_q], centres, sigmas, lams)
        pred_p, pred_q = grid.predict(x_p[held_p]), grid.predict(x_q[held_q])
        if oof_p is None:
            oof_p = x_p.new_empty(grid.size, len(x_p))
            oof_q = x_q.new_empty(grid.size, len(x_q))
        oof_p[:, held_p], oof_q[:, held_q] = pred_p, pred_q
    loss = get_loss(METHOD_LOSS[method])
    return CrossValidation(loss.risk(loss.clip(oof_p), loss.clip(oof_q)), oof_p, oof_q)
