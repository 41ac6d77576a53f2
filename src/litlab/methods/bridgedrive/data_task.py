"""The data task: roll out the IDM+MOBIL expert, store ``expert.npz``, and plot plans and k-means anchors."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import torch

from litlab.core.results import TaskOutput
from litlab.datamodules.driving import collect_expert_dataset
from litlab.datamodules.driving_sim import SceneConfig
from litlab.methods.bridgedrive.anchors import kmeans
from litlab.task import TaskContext


def expert_data_task(
    ctx: TaskContext,
    scenes: Sequence[dict],
    episodes: int = 40,
    seed: int = 0,
    horizon: int = 8,
    stride: int = 2,
    n_anchors: int = 16,
) -> TaskOutput:
    """Write ``expert.npz`` (train with ``data.path=<run>/expert.npz``), ``anchors.npy`` and a plot."""
    output_dir = Path(ctx.output_dir)
    data = collect_expert_dataset([SceneConfig(**dict(s)) for s in scenes], episodes, seed, horizon, stride)
    np.savez_compressed(output_dir / "expert.npz", **data)
    plans = torch.from_numpy(data["plan"])
    anchors = kmeans(plans, n_anchors, seed=seed).numpy()
    np.save(output_dir / "anchors.npy", anchors)
    lateral = data["plan"][:, -1, 1]
    results = {
        "frames": float(len(plans)),
        "episodes": float(len(np.unique(data["episode"]))),
        "lane_change_fraction": float((np.abs(lateral) > 2.0).mean()),
    }
    fig, ax = plt.subplots(figsize=(6, 4))
    sample = data["plan"][np.random.default_rng(seed).choice(len(plans), min(300, len(plans)), replace=False)]
    for plan in sample:
        ax.plot(plan[:, 0], plan[:, 1], color="0.7", lw=0.5)
    for anchor in anchors:
        ax.plot(anchor[:, 0], anchor[:, 1], "o-", ms=2, lw=1.2)
    ax.set_xlabel("x ahead (m)")
    ax.set_ylabel("y right (m)")
    ax.set_title(f"expert plans (grey) and {n_anchors} k-means anchors")
    return {"metrics": results, "figures": {"plans_and_anchors": fig}}
