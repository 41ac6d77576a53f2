"""Build a planner from expert data (anchors, normalisation) and fit it with a plain minibatch loop.

The closed-loop study trains many small planners in one process; a bare loop avoids a Trainer per arm.
``module.PlannerModule`` trains the same ``planner.loss`` under Lightning for ``litlab-train``.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from litlab.methods.bridgedrive.anchors import kmeans, nearest_anchor
from litlab.methods.bridgedrive.planners import Planner

PlannerFactory = Callable[..., Planner]


def plan_statistics(plans: Tensor, n_anchors: int, seed: int) -> dict[str, Tensor]:
    """Anchors ``(K, H, 2)`` (k-means), per-index ``mean`` and ``std`` ``(H, 2)`` of ``plans: (N, H, 2)``."""
    return {
        "anchors": kmeans(plans, n_anchors, seed=seed),
        "mean": plans.mean(dim=0),
        "std": plans.std(dim=0),
    }


def build_planner(factory: PlannerFactory, obs: Tensor, plans: Tensor, n_anchors: int, seed: int) -> Planner:
    """``factory(obs_dim=..., anchors=..., mean=..., std=...)`` with statistics of the training plans."""
    torch.manual_seed(seed)
    return factory(obs_dim=obs.shape[1], **plan_statistics(plans, n_anchors, seed))


def fit_planner(
    planner: Planner, obs: Tensor, plans: Tensor, steps: int, batch_size: int, lr: float, seed: int
) -> list[float]:
    """AdamW with cosine decay for ``steps`` minibatches of ``obs (N, D), plans (N, H, 2)``; losses."""
    generator = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    optimizer = torch.optim.AdamW(planner.parameters(), lr=lr, weight_decay=1e-4)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, steps)
    planner.train()
    losses = []
    for _ in range(steps):
        index = torch.randint(len(obs), (min(batch_size, len(obs)),), generator=generator)
        loss = planner.loss(obs[index], plans[index])["loss"]
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        schedule.step()
        losses.append(loss.item())
    planner.eval()
    return losses


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
