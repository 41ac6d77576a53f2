"""The data task at toy size: expert.npz (as the DataModule loads it), k-means anchors, metrics and plot."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

from litlab.datamodules.driving import load_or_collect
from litlab.datamodules.driving_sim import SceneConfig
from litlab.methods.bridgedrive.data_task import expert_data_task
from litlab.task import TaskContext

SCENES = [
    {"env_id": "highway-fast-v0", "duration": 4, "route_length": 50, "simulation_frequency": 15},
    {"env_id": "merge-v0", "duration": 4, "route_length": 50, "simulation_frequency": 15},
]


def test_data_task_writes_a_loadable_dataset_its_anchors_and_consistent_metrics(tmp_path: Path) -> None:
    horizon, stride, n_anchors = 4, 2, 4
    out = expert_data_task(
        TaskContext.local(tmp_path),
        SCENES,
        episodes=2,
        seed=3,
        horizon=horizon,
        stride=stride,
        n_anchors=n_anchors,
    )
    scenes = [SceneConfig(**s) for s in SCENES]
    data = load_or_collect(scenes, 2, 3, horizon, stride, path=tmp_path / "expert.npz")
    obs, plan, episode = data["obs"], data["plan"], data["episode"]
    n = len(plan)
    assert plan.shape == (n, horizon, 2) and obs.shape[0] == n and episode.shape == (n,)
    # two scenes x two episodes, numbered scene-major; each logs at most its steps with a full future
    # (4 s at 5 Hz: 21 poses, the last horizon * stride of which have none)
    assert set(episode.tolist()) == {0, 1, 2, 3}
    assert np.bincount(episode).max() <= 4 * 5 + 1 - horizon * stride
    assert (np.diff(plan[..., 0], axis=1) > 0).all()  # the expert drives forward
    metrics = out["metrics"]
    assert metrics["frames"] == n and metrics["episodes"] == 4
    lane_changes = float((np.abs(plan[:, -1, 1]) > 2.0).mean())
    assert 0 <= metrics["lane_change_fraction"] <= 1 and metrics["lane_change_fraction"] == lane_changes
    # k-means centres are means of plans, so they lie inside the plans' bounding box
    anchors = np.load(tmp_path / "anchors.npy")
    assert anchors.shape == (n_anchors, horizon, 2)
    assert (anchors >= plan.min(axis=0) - 1e-4).all() and (anchors <= plan.max(axis=0) + 1e-4).all()
    assert len({tuple(a.ravel().round(3)) for a in anchors}) == n_anchors
    figure = out["figures"]["plans_and_anchors"]  # written to plots/ (and wandb) by the runner
    assert len(figure.axes[0].lines) == min(300, n) + n_anchors  # a sample of plans, then every anchor
    plt.close(figure)
