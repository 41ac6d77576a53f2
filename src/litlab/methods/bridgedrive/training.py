"""Build a planner from expert data (anchors, normalisation), fit it through the project's ``Fitter``, and
score it open loop (ADE / FDE / anchor accuracy).

The study fits every arm with the same recipe: AdamW (weight decay 1e-4) with cosine decay over
``steps`` minibatches drawn in a seeded per-epoch shuffle (``datamodules.base.batch_loader``), through
``PlannerModule.training_step``, so ``trainer=`` reaches the study as it reaches ``litlab-train``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import torch
from torch import Tensor

from litlab.datamodules.base import TensorBatchDataset, batch_loader
from litlab.fitting import FitResult, Fitter
from litlab.methods.bridgedrive.anchors import nearest_anchor, plan_statistics
from litlab.methods.bridgedrive.module import PlannerModule
from litlab.methods.bridgedrive.planners import Planner

PlannerFactory = Callable[..., Planner]


def build_planner(factory: PlannerFactory, obs: Tensor, plans: Tensor, n_anchors: int, seed: int) -> Planner:
    """``factory(obs_dim=..., anchors=..., mean=..., std=...)`` with statistics of the training plans."""
    torch.manual_seed(seed)
    return factory(obs_dim=obs.shape[1], **plan_statistics(plans, n_anchors, seed))


def fit_planner(
    fitter: Fitter,
    planner: Planner,
    obs: Tensor,
    plans: Tensor,
    steps: int,
    batch_size: int,
    lr: float,
    seed: int,
) -> FitResult:
    """``steps`` AdamW steps (cosine decay) on shuffled minibatches of ``obs (N, D), plans (N, H, 2)``."""
    module = PlannerModule(
        planner,
        functools.partial(torch.optim.AdamW, lr=lr, weight_decay=1e-4),
        scheduler=functools.partial(torch.optim.lr_scheduler.CosineAnnealingLR, T_max=steps),
    )
    loader = batch_loader(TensorBatchDataset(obs, plans), min(batch_size, len(obs)), True, seed, 0)
    result = fitter.fit(module, loader, max_steps=steps, seed=seed)
    planner.cpu().eval()
    return result


def open_loop_metrics(
    planner: Planner, obs: Tensor, plans: Tensor, steps: int, seed: int = 0
) -> dict[str, float]:
    """ADE / FDE (m) of the planner's plans against expert ``plans: (N, H, 2)``, and anchor accuracy."""
    generator = torch.Generator().manual_seed(seed)
    predicted = planner.plan(obs, steps, generator)
    error = (predicted - plans).norm(dim=-1)
    metrics = {"ade": error.mean().item(), "fde": error[:, -1].mean().item()}
    if planner.uses_anchors:
        with torch.no_grad():
            accuracy = (planner.classify(obs) == nearest_anchor(plans, planner.anchors)).float().mean()
        metrics["anchor_accuracy"] = accuracy.item()
    return metrics
