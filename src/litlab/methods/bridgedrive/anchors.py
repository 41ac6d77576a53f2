"""Anchors: k-means centres of expert plans, and the anchor nearest to a plan (the classifier target)."""

from __future__ import annotations

import torch
from torch import Tensor


def kmeans(points: Tensor, k: int, iterations: int = 50, seed: int = 0) -> Tensor:
    """``(k, *shape)`` centres of ``points: (N, *shape)`` by Lloyd's algorithm with k-means++ seeding.

    Distances are Euclidean on the flattened points (the mean L2 over waypoints up to a constant).
    """
    x = points.reshape(len(points), -1).double()
    if k > len(x):
        raise ValueError(f"k={k} anchors need at least k plans, got {len(x)}")
    generator = torch.Generator().manual_seed(seed)
    centres = x[torch.randint(len(x), (1,), generator=generator)]
    for _ in range(k - 1):  # k-means++: next centre with probability ∝ squared distance
        d2 = torch.cdist(x, centres).min(dim=1).values ** 2
        centres = torch.cat([centres, x[torch.multinomial(d2 / d2.sum(), 1, generator=generator)]])
    for _ in range(iterations):
        assign = torch.cdist(x, centres).argmin(dim=1)
        counts = torch.bincount(assign, minlength=k).unsqueeze(1)
        sums = torch.zeros_like(centres).index_add_(0, assign, x)
        centres = torch.where(counts > 0, sums / counts.clamp_min(1), centres)
    return centres.reshape(k, *points.shape[1:]).to(points.dtype)


def nearest_anchor(plans: Tensor, anchors: Tensor) -> Tensor:
    """``(B,)`` index of the anchor with the smallest mean L2 distance over waypoints to each plan.

    ``plans: (B, H, 2)``, ``anchors: (K, H, 2)``.
    """
    distance = (plans[:, None] - anchors[None]).norm(dim=-1).mean(dim=-1)  # (B, K)
    return distance.argmin(dim=1)


def plan_statistics(plans: Tensor, n_anchors: int, seed: int) -> dict[str, Tensor]:
    """Anchors ``(K, H, 2)`` (k-means), per-index ``mean`` and ``std`` ``(H, 2)`` of ``plans: (N, H, 2)``."""
    return {
        "anchors": kmeans(plans, n_anchors, seed=seed),
        "mean": plans.mean(dim=0),
        "std": plans.std(dim=0),
    }
