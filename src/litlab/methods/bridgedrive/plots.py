"""Figures of the closed-loop study: one episode per planner, and a metric against denoising steps."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from scipy import stats

from litlab.methods.bridgedrive.closed_loop import EpisodeLog


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


def plot_sweep(episodes: pd.DataFrame, metric: str) -> plt.Figure:
    """``metric`` against denoising steps per planner: mean of per-seed means ± seed-level 95% interval."""
    fig, ax = plt.subplots(figsize=(5, 3.5))
    for name, group in episodes.groupby("planner"):
        per_seed = group.groupby(["denoise_steps", "seed"])[metric].mean().groupby(level=0)
        mean, std, count = per_seed.mean(), per_seed.std().fillna(0), per_seed.count()
        half = stats.t.ppf(0.975, np.maximum(count - 1, 1)) * std / np.sqrt(count)
        ax.errorbar(mean.index, mean, yerr=half, marker="o", capsize=3, label=name)
    ax.set_xscale("log")
    ax.set_xlabel("denoising steps (NFE)")
    ax.set_ylabel(metric)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig
