"""The closed-loop study (a task): train every planner on the same expert data, drive each in highway-env,
and report success, collisions, driving score, speed and jerk with 95% intervals, plus a sweep over the
number of denoising steps. Writes ``episodes.csv``, ``summary.csv``, ``table.md``, ``results.json``, plots."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import torch
from rich.progress import track

from litlab.core.figures import save_figure
from litlab.core.results import TaskOutput
from litlab.datamodules.driving import load_or_collect, split_by_episode
from litlab.datamodules.driving_sim import SceneConfig
from litlab.methods.bridgedrive.closed_loop import EpisodeLog, run_episodes, summarize
from litlab.methods.bridgedrive.controller import PurePursuit
from litlab.methods.bridgedrive.planners import Planner
from litlab.methods.bridgedrive.training import build_planner, fit_planner, open_loop_metrics
from litlab.task import TaskContext

METRICS = ("success", "collision", "off_road", "driving_score", "mean_speed", "jerk")


def train_planners(
    factories: dict[str, Callable[..., Planner]],
    obs: torch.Tensor,
    plans: torch.Tensor,
    n_anchors: int,
    train_steps: int,
    batch_size: int,
    lr: float,
    seed: int,
) -> dict[str, Planner]:
    """Every planner built on the same data statistics and fitted with the same seed and budget."""
    trained = {}
    for name, factory in factories.items():
        planner = build_planner(factory, obs, plans, n_anchors, seed)
        fit_planner(planner, obs, plans, train_steps, batch_size, lr, seed)
        trained[name] = planner
    return trained


def plot_episode(logs: dict[str, EpisodeLog], title: str) -> plt.Figure:
    """Ego path, plans (thin) and chosen anchors (dashed) of one episode per planner, world frame."""
    fig, axes = plt.subplots(len(logs), 1, figsize=(10, 1.6 * len(logs)), sharex=True, squeeze=False)
    for ax, (name, log) in zip(axes[:, 0], logs.items(), strict=True):
        poses = np.array(log.poses)
        for anchor in log.anchors[::3]:
            ax.plot(anchor[:, 0], anchor[:, 1], "--", color="tab:green", lw=0.6, alpha=0.6)
        for plan in log.plans[::3]:
            ax.plot(plan[:, 0], plan[:, 1], color="tab:red", lw=0.6, alpha=0.6)
        ax.plot(poses[:, 0], poses[:, 1], color="k", lw=1.5)
        outcome = (
            "crash" if log.crashed else "off-road" if log.off_road else "done" if log.done else "timeout"
        )
        ax.set_title(f"{name}: {outcome}", fontsize=8)
        ax.invert_yaxis()  # highway-env's y points to the right-hand lanes
        ax.set_ylabel("y (m)")
    axes[-1, 0].set_xlabel("x (m)")
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def plot_sweep(sweep: pd.DataFrame, metric: str) -> plt.Figure:
    """``metric`` (mean ± 95% CI over episodes) against denoising steps, per planner."""
    fig, ax = plt.subplots(figsize=(5, 3.5))
    for name, group in sweep.groupby("planner"):
        stats = group.groupby("denoise_steps")[metric].agg(["mean", "std", "count"])
        half = 1.96 * stats["std"].fillna(0) / np.sqrt(stats["count"])
        ax.errorbar(stats.index, stats["mean"], yerr=half, marker="o", capsize=3, label=name)
    ax.set_xscale("log")
    ax.set_xlabel("denoising steps (NFE)")
    ax.set_ylabel(metric)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def closed_loop_study(
    ctx: TaskContext,
    planners: dict[str, Callable[..., Planner]],
    scenes: Sequence[dict],
    train_episodes: int = 40,
    eval_episodes: int = 20,
    seeds: Sequence[int] = (0, 1, 2),
    denoise_steps: int = 2,
    sweep_steps: Sequence[int] = (1, 2, 5, 10, 20),
    sweep_planners: Sequence[str] = ("bridge", "truncated", "plain"),
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
    """Train each planner per seed on one expert dataset, evaluate all in closed loop (``eval_episodes`` per
    scene, traffic seeds disjoint from training), sweep ``sweep_steps`` for ``sweep_planners``."""
    output_dir = ctx.output_dir
    output_dir = Path(output_dir)
    scene_configs = [SceneConfig(**dict(s)) for s in scenes]
    data = load_or_collect(scene_configs, train_episodes, data_seed, horizon, stride, data_path)
    train, val = split_by_episode(data["episode"], 0.2, data_seed)
    obs, plans = torch.from_numpy(data["obs"]), torch.from_numpy(data["plan"])
    waypoint_dt = stride * scene_configs[0].dt
    pursuit = PurePursuit(dt=waypoint_dt, **dict(controller or {}))
    rows, open_loop, examples = [], [], {}
    jobs = [(seed, name) for seed in seeds for name in planners]
    trained: dict[int, dict[str, Planner]] = {}
    for seed, name in track(jobs, description="train + drive"):
        if seed not in trained:
            trained[seed] = train_planners(
                planners, obs[train], plans[train], n_anchors, train_steps, batch_size, lr, seed
            )
        planner = trained[seed][name]
        open_loop.append(
            {"seed": seed, "planner": name, **open_loop_metrics(planner, obs[val], plans[val], denoise_steps)}
        )
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
    episodes.to_csv(output_dir / "episodes.csv", index=False)
    pd.DataFrame(open_loop).to_csv(output_dir / "open_loop.csv", index=False)
    main = episodes[episodes.denoise_steps == denoise_steps]
    results: dict[str, float] = {}
    summary = []
    for name in planners:
        block = main[main.planner == name]
        row = {"planner": name}
        for metric in METRICS:
            stats = summarize(block[metric].to_numpy())
            row[metric], row[f"{metric}_ci95"] = stats["mean"], stats["ci95"]
            results[f"{name}/{metric}"] = stats["mean"]
        per_seed = block.groupby("seed")["success"].mean()
        row["success_per_seed"] = " ".join(f"{v:.2f}" for v in per_seed)
        ol = pd.DataFrame(open_loop)
        for key in ("ade", "fde", "anchor_accuracy"):
            if key in ol and ol[ol.planner == name][key].notna().any():
                row[key] = results[f"{name}/{key}"] = float(ol[ol.planner == name][key].mean())
        summary.append(row)
    summary_frame = pd.DataFrame(summary)
    summary_frame.to_csv(output_dir / "summary.csv", index=False)
    (output_dir / "table.md").write_text(summary_frame.to_markdown(index=False, floatfmt=".3f") + "\n")
    sweep = episodes[episodes.planner.isin(list(sweep_planners))]
    if len(sweep):
        save_figure(plot_sweep(sweep, "success"), output_dir, "sweep_success")
        save_figure(plot_sweep(sweep, "driving_score"), output_dir, "sweep_driving_score")
    for env_id, logs in examples.items():
        save_figure(plot_episode(logs, f"{env_id}, {denoise_steps} step(s)"), output_dir, f"episode_{env_id}")
    return {"metrics": results}
