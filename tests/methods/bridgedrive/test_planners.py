"""Planners: DDIM step against diffusers, focal loss, anchors, losses and plan shapes of every arm."""

from __future__ import annotations

import pytest
import torch
from diffusers import DDIMScheduler

from litlab.methods.bridgedrive import planners as P
from litlab.methods.bridgedrive.anchors import kmeans, nearest_anchor
from litlab.methods.bridgedrive.training import build_planner, fit_planner, open_loop_metrics

ARMS = [
    P.BridgePlanner,
    P.TruncatedDiffusionPlanner,
    P.PlainDiffusionPlanner,
    P.AnchorClassifierPlanner,
    P.RegressionPlanner,
]


def toy_data(n: int = 96, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Three-mode plans (keep lane, left, right) chosen by one observation feature."""
    g = torch.Generator().manual_seed(seed)
    mode = torch.randint(0, 3, (n,), generator=g)
    obs = torch.randn(n, 10, generator=g)
    obs[:, 0] = mode.float() - 1
    x = torch.linspace(6, 48, 8)
    lateral = torch.tensor([0.0, 4.0, -4.0])[mode][:, None] * torch.linspace(0, 1, 8) ** 2
    return obs, torch.stack([x.expand(n, 8), lateral], dim=-1) + 0.05 * torch.randn(n, 8, 2, generator=g)


def test_ddim_update_matches_diffusers_step() -> None:
    scheduler = P.make_scheduler("leading")
    scheduler.set_timesteps(10)
    x_t, x0 = torch.randn(2, 4, 8, 2)
    for t in scheduler.timesteps[:3]:
        expected = scheduler.step(x0, t, x_t).prev_sample
        prev = t - 1000 // 10
        ab = scheduler.alphas_cumprod
        got = P.ddim_update(x_t, x0, ab[t], ab[prev] if prev >= 0 else torch.tensor(1.0))
        torch.testing.assert_close(got, expected)
    assert isinstance(scheduler, DDIMScheduler)


def test_focal_loss_matches_its_formula() -> None:
    logits, target = torch.randn(5, 4), torch.tensor([0, 3, 1, 1, 2])
    p = logits.sigmoid()
    y = torch.nn.functional.one_hot(target, 4).float()
    pt = p * y + (1 - p) * (1 - y)
    weight = 0.25 * y + 0.75 * (1 - y)
    expected = (-weight * (1 - pt) ** 2 * pt.log()).sum() / 5
    torch.testing.assert_close(P.focal_loss(logits, target), expected)


def test_kmeans_finds_separated_clusters_and_nearest_anchor_matches_brute_force() -> None:
    _, plans = toy_data(120)
    anchors = kmeans(plans, 3, seed=0)
    finals = sorted(anchors[:, -1, 1].tolist())
    assert finals == pytest.approx([-4.0, 0.0, 4.0], abs=0.1)
    index = nearest_anchor(plans, anchors)
    for i in range(0, 120, 17):
        distances = [(plans[i] - a).norm(dim=-1).mean().item() for a in anchors]
        assert index[i].item() == min(range(3), key=distances.__getitem__)


@pytest.mark.parametrize("arm", ARMS, ids=lambda c: c.__name__)
def test_every_arm_trains_and_plans_in_metres(arm: type) -> None:
    obs, plans = toy_data()
    planner = build_planner(arm, obs, plans, n_anchors=3, seed=0)
    losses = planner.loss(obs, plans)
    losses["loss"].backward()
    assert torch.isfinite(losses["loss"])
    out = planner.plan(obs[:4], steps=3, generator=torch.Generator().manual_seed(0))
    assert out.shape == (4, 8, 2)
    assert out[:, :, 0].min() > 0  # forward of the ego, metres not normalised units


def test_bridge_and_truncated_share_the_parameter_budget() -> None:
    obs, plans = toy_data()
    counts = {
        arm.__name__: sum(p.numel() for p in build_planner(arm, obs, plans, 3, 0).parameters())
        for arm in ARMS
    }
    assert counts["BridgePlanner"] == counts["TruncatedDiffusionPlanner"]
    assert counts["PlainDiffusionPlanner"] == counts["RegressionPlanner"]


def test_truncated_timesteps_follow_diffusiondrive() -> None:
    obs, plans = toy_data()
    planner = build_planner(P.TruncatedDiffusionPlanner, obs, plans, 3, 0)
    assert planner.timesteps(2) == [10, 0]
    assert planner.timesteps(1) == [10]
    assert planner.timesteps(5) == [10, 8, 5, 2, 0]


def test_bridge_planner_learns_the_multimodal_toy_task() -> None:
    """A few hundred steps: the classifier picks the right lane-change mode and the plan lands within 1 m."""
    obs, plans = toy_data(256)
    planner = build_planner(P.BridgePlanner, obs, plans, 3, 0)
    fit_planner(planner, obs, plans, steps=300, batch_size=128, lr=3e-3, seed=0)
    test_obs, test_plans = toy_data(128, seed=1)
    metrics = open_loop_metrics(planner, test_obs, test_plans, steps=2)
    assert metrics["anchor_accuracy"] > 0.95
    assert metrics["ade"] < 1.0
