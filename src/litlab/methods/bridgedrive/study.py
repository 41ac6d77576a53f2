"""The closed-loop study (a task): train every planner per seed on one expert dataset, drive each in
highway-env, and report success, collisions, driving score, speed and jerk with seed-level 95% intervals,
paired differences of the bridge against every other arm, a sweep over denoising steps, and the paper's
Bench2Drive numbers beside ours. Writes ``episodes.csv`` and ``open_loop.csv`` besides the tables."""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd
import torch

from litlab.core.progress import track
from litlab.core.results import TaskOutput
from litlab.core.stats import mean_and_half_width
from litlab.datamodules.driving import load_or_collect, split_by_episode
from litlab.datamodules.driving_sim import SceneConfig
from litlab.methods.bridgedrive.closed_loop import run_episodes
from litlab.methods.bridgedrive.controller import PurePursuit
from litlab.methods.bridgedrive.planners import Planner
from litlab.methods.bridgedrive.plots import plot_episode, plot_sweep
from litlab.methods.bridgedrive.training import build_planner, fit_planner, open_loop_metrics
from litlab.task import TaskContext

METRICS = ("success", "collision", "off_road", "completion", "driving_score", "mean_speed", "jerk")
# Bench2Drive (CARLA closed loop), the paper's Table: success rate (%) and driving score.
PAPER = {
    "bridge": {"paper_method": "BridgeDrive", "paper_SR": 74.99, "paper_DS": 87.99},
    "truncated": {"paper_method": "DiffusionDrive", "paper_SR": 52.72, "paper_DS": 77.68},
}


def seed_interval(values: np.ndarray) -> tuple[float, float]:
    """Mean and 95% Student-t half-width over per-seed ``values`` (nan half-width for one seed)."""
    return mean_and_half_width(values)


def summary_rows(episodes: pd.DataFrame, open_loop: pd.DataFrame, arms: Sequence[str]) -> list[dict]:
    """Per arm: every metric as the mean over seeds of per-seed means, ± a seed-level 95% interval."""
    rows = []
    for name in arms:
        per_seed = episodes[episodes.planner == name].groupby("seed")[list(METRICS)].mean()
        row: dict = {"planner": name, "seeds": len(per_seed)}
        for metric in METRICS:
            row[metric], row[f"{metric}_ci95"] = seed_interval(per_seed[metric].to_numpy())
        row["success_per_seed"] = " ".join(f"{v:.2f}" for v in per_seed["success"])
        ol = open_loop[open_loop.planner == name]
        for key in ("ade", "fde", "anchor_accuracy"):
            if key in ol and ol[key].notna().any():
                row[key] = float(ol[key].mean())
        rows.append(row)
    return rows


def scene_rows(episodes: pd.DataFrame, arms: Sequence[str]) -> list[dict]:
    """Per arm and scene: success, collision, off-road and route completion over all seeds' episodes."""
    means = episodes.groupby(["planner", "scene"])[["success", "collision", "off_road", "completion"]].mean()
    return [
        {"planner": name, "scene": scene, **means.loc[(name, scene)].to_dict()}
        for name in arms
        for scene in episodes.scene.unique()
    ]


def paired_rows(episodes: pd.DataFrame, reference: str, arms: Sequence[str], metric: str) -> list[dict]:
    """``reference`` − arm of ``metric`` per seed (same traffic episodes), with a seed-level interval."""
    per_seed = episodes.groupby(["planner", "seed"])[metric].mean().unstack("planner")
    rows = []
    for name in arms:
        if name == reference:
            continue
        diff = (per_seed[reference] - per_seed[name]).to_numpy()
        mean, half = seed_interval(diff)
        rows.append(
            {
                "comparison": f"{reference} - {name}",
                "metric": metric,
                "mean": mean,
                "ci95": half,
                "seeds_ahead": int((diff > 0).sum()),
                "seeds": len(diff),
                "per_seed": " ".join(f"{v:+.2f}" for v in diff),
            }
        )
    return rows


def paper_rows(summary: list[dict]) -> list[dict]:
    """The paper's Bench2Drive success rate / driving score beside our highway-env success / score."""
    rows = []
    for row in summary:
        paper = PAPER.get(row["planner"], {"paper_method": "-", "paper_SR": None, "paper_DS": None})
        rows.append(
            {
                "arm": row["planner"],
                **paper,
                "ours_success": row["success"],
                "ours_success_ci95": row["success_ci95"],
                "ours_driving_score": row["driving_score"],
            }
        )
    return rows


def study(
    ctx: TaskContext,
    *,
    seeds: list[int],
    planners: dict[str, Callable[..., Planner]],
    scenes: Sequence[dict],
    train_episodes: int = 60,
    eval_episodes: int = 15,
    denoise_steps: int = 2,
    sweep_steps: Sequence[int] = (1, 2, 5),
    sweep_planners: Sequence[str] = ("bridge", "truncated", "plain"),
    reference: str = "bridge",
    anchor_variants: dict[str, str] | None = None,
    n_anchors: int = 16,
    horizon: int = 8,
    stride: int = 2,
    train_steps: int = 800,
    batch_size: int = 256,
    lr: float = 2e-3,
    replan_every: int = 1,
    controller: dict | None = None,
    data_seed: int = 0,
    data_path: str | None = None,
) -> TaskOutput:
    """Train each planner per seed on one expert dataset, drive all in closed loop on the same traffic
    (``eval_episodes`` per scene, traffic seeds disjoint from training), sweep ``sweep_steps``.

    ``anchor_variants`` (name -> ``anchor_choice``) are extra arms that sample the trained ``reference``
    bridge from another anchor (random, fixed): the same weights, so no extra training.
    """
    scene_configs = [SceneConfig(**dict(s)) for s in scenes]
    data = load_or_collect(scene_configs, train_episodes, data_seed, horizon, stride, data_path)
    train, val = split_by_episode(data["episode"], 0.2, data_seed)
    obs, plans = torch.from_numpy(data["obs"]), torch.from_numpy(data["plan"])
    waypoint_dt = stride * scene_configs[0].dt
    pursuit = PurePursuit(dt=waypoint_dt, **dict(controller or {}))
    rows, open_loop, examples = [], [], {}
    variants = dict(anchor_variants or {})
    arms = [*planners, *variants]
    jobs = [(seed, name) for seed in seeds for name in arms]
    trained: dict[str, Planner] = {}
    for seed, name in track(jobs, description="train + drive"):
        if name in variants:
            planner = copy.deepcopy(trained[reference])
            planner.anchor_choice = variants[name]
        else:
            planner = build_planner(planners[name], obs[train], plans[train], n_anchors, seed)
            fit_planner(ctx.fitter, planner, obs[train], plans[train], train_steps, batch_size, lr, seed)
            trained[name] = planner
        metrics = open_loop_metrics(planner, obs[val], plans[val], denoise_steps)
        open_loop.append({"seed": seed, "planner": name, **metrics})
        steps_list = sorted(set(sweep_steps) | {denoise_steps}) if name in sweep_planners else [denoise_steps]
        for steps in steps_list:
            for s, scene in enumerate(scene_configs):
                traffic = [100_000 + 1000 * s + i for i in range(eval_episodes)]
                logs = run_episodes(
                    planner, scene, traffic, steps, waypoint_dt, replan_every, pursuit, record_plans=True
                )
                if steps == denoise_steps and seed == seeds[0]:
                    examples.setdefault(scene.env_id, {})[name] = logs[0]
                for episode, log in zip(traffic, logs, strict=True):
                    rows.append(
                        {
                            "seed": seed,
                            "planner": name,
                            "denoise_steps": steps,
                            "scene": scene.env_id,
                            "episode": episode,
                            **log.metrics(scene.route_length, scene.dt),
                        }
                    )
    episodes = pd.DataFrame(rows)
    open_frame = pd.DataFrame(open_loop)
    episodes.to_csv(ctx.output_dir / "episodes.csv", index=False)
    open_frame.to_csv(ctx.output_dir / "open_loop.csv", index=False)
    main = episodes[episodes.denoise_steps == denoise_steps]
    summary = summary_rows(main, open_frame, arms)
    paired = paired_rows(main, reference, arms, "success")
    paired += paired_rows(main, reference, arms, "driving_score")
    sweep = episodes[episodes.planner.isin(list(sweep_planners))]
    per_seed = sweep.groupby(["planner", "denoise_steps", "seed"])["success"].mean()
    sweep_rows = []
    for (name, steps), values in per_seed.groupby(level=[0, 1]):
        mean, half = seed_interval(values.to_numpy())
        sweep_rows.append({"planner": name, "denoise_steps": steps, "success": mean, "success_ci95": half})
    metrics: dict[str, float] = {}
    for row in summary:
        for key in (*METRICS, "ade", "fde", "anchor_accuracy"):
            if key in row:
                metrics[f"{row['planner']}/{key}"] = row[key]
        metrics[f"{row['planner']}/success_ci95"] = row["success_ci95"]
    for row in paired:
        metrics[f"paired/{row['metric']}/{row['comparison'].replace(' ', '')}"] = row["mean"]
    figures = {
        f"episode_{env_id}": plot_episode(logs, f"{env_id}, {denoise_steps} step(s)")
        for env_id, logs in examples.items()
    }
    if len(sweep):
        figures["sweep_success"] = plot_sweep(sweep, "success")
        figures["sweep_driving_score"] = plot_sweep(sweep, "driving_score")
    return {
        "metrics": metrics,
        "tables": {
            "summary": summary,
            "paired": paired,
            "by_scene": scene_rows(main, arms),
            "sweep": sweep_rows,
            "paper_vs_ours": paper_rows(summary),
        },
        "figures": figures,
    }
