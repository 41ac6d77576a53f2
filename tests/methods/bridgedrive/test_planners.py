"""Planners: DDIM step against diffusers, focal loss, anchors, losses and plan shapes of every arm."""

from __future__ import annotations

import functools

import pytest
import torch
from diffusers import DDIMScheduler

from litlab.fitting import Fitter
from litlab.methods.bridgedrive import planners as P
from litlab.methods.bridgedrive.anchors import kmeans, nearest_anchor, plan_statistics
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


def test_truncated_timesteps_start_where_diffusiondrive_does() -> None:
    obs, plans = toy_data()
    planner = build_planner(P.TruncatedDiffusionPlanner, obs, plans, 3, 0)
    assert planner.timesteps(2) == [8, 0]
    assert planner.timesteps(1) == [8]
    assert planner.timesteps(5) == [8, 6, 4, 2, 0]


def test_denoiser_has_no_residual_on_x_t() -> None:
    """Every arm predicts x̂_0 outright: x_t reaches the output only through the network."""
    obs, plans = toy_data()
    planner = build_planner(P.BridgePlanner, obs, plans, 3, 0)
    decoder = planner.decoder
    torch.nn.init.zeros_(decoder.net[-1].weight)
    torch.nn.init.zeros_(decoder.net[-1].bias)
    x_t = torch.randn(4, 8, 2)
    out = decoder(torch.randn(4, 128), x_t, torch.randn(4, 8, 2), torch.rand(4) * 1000)
    torch.testing.assert_close(out, torch.zeros_like(x_t))


def test_bridge_ablations_start_from_the_mean_plan_a_random_or_a_fixed_anchor() -> None:
    obs, plans = toy_data()
    context = torch.randn(6, 128)
    no_anchor = build_planner(functools.partial(P.BridgePlanner, anchor=False), obs, plans, 3, 0)
    assert no_anchor.classifier is None and not no_anchor.uses_anchors
    torch.testing.assert_close(no_anchor.denormalize(no_anchor.start(context)), plans.mean(0).expand(6, 8, 2))
    assert torch.isfinite(no_anchor.loss(obs, plans)["loss"])
    fixed = build_planner(functools.partial(P.BridgePlanner, anchor_choice="fixed"), obs, plans, 3, 0)
    starts = fixed.denormalize(fixed.start(context))
    assert (starts == starts[:1]).all()
    random = build_planner(functools.partial(P.BridgePlanner, anchor_choice="random"), obs, plans, 3, 0)
    picks = random.denormalize(random.start(torch.randn(200, 128), torch.Generator().manual_seed(0)))
    assert len({round(p[-1, 1].item(), 3) for p in picks}) == 3  # every anchor drawn
    with pytest.raises(ValueError, match="anchor_choice"):
        P.BridgePlanner(obs_dim=10, anchor_choice="best", **plan_statistics(plans, 3, 0))


def test_bridge_planner_learns_the_multimodal_toy_task() -> None:
    """A few hundred steps: the classifier picks the right lane-change mode and the plan lands within 1 m."""
    obs, plans = toy_data(256)
    planner = build_planner(P.BridgePlanner, obs, plans, 3, 0)
    fit = fit_planner(Fitter(), planner, obs, plans, steps=300, batch_size=128, lr=3e-3, seed=0)
    assert fit.steps == 300
    test_obs, test_plans = toy_data(128, seed=1)
    metrics = open_loop_metrics(planner, test_obs, test_plans, steps=2)
    assert metrics["anchor_accuracy"] > 0.95
    assert metrics["ade"] < 1.0
