"""BridgeDrive's claim, CI-sized, in closed loop (highway-fast-v0 + merge-v0, 2 denoising steps for all).

The paper's ordering (bridge >= truncated > plain success) is within sampling noise at this scale (method
README). So the test asserts what is robust: the bridge is not worse than either diffusion baseline by
more than the noise of 40 paired episodes, it clears a floor that catastrophic errors (a sign or frame
error that leaves the road or crashes at once) miss, and its open-loop error is close to the truncated
planner's (both start from the same anchors; a bridge that failed to refine would have the anchor error).
It also checks that the study task writes its tables and plots."""

from __future__ import annotations

from functools import partial
from pathlib import Path

import pandas as pd
import pytest

from litlab.methods.bridgedrive import planners as P
from litlab.methods.bridgedrive.study import closed_loop_study
from litlab.task import TaskContext

CLAIM = {"train_episodes": 30, "eval_episodes": 20, "train_steps": 600}
NOISE = 0.2  # about two standard errors of a difference of two 40-episode success rates near 0.5
SCENES = [
    {
        "env_id": "highway-fast-v0",
        "vehicles_count": 10,
        "vehicles_density": 1.5,
        "duration": 15,
        "route_length": 300,
    },
    {"env_id": "merge-v0", "duration": 15, "route_length": 300},
]


@pytest.mark.slow
def test_closed_loop_claim(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("LITLAB_CACHE", str(tmp_path / "cache"))
    results = closed_loop_study(
        TaskContext.local(tmp_path),
        planners={
            "bridge": partial(P.BridgePlanner),
            "truncated": partial(P.TruncatedDiffusionPlanner),
            "plain": partial(P.PlainDiffusionPlanner),
        },
        scenes=SCENES,
        train_episodes=CLAIM["train_episodes"],
        eval_episodes=CLAIM["eval_episodes"],
        seeds=[0],
        denoise_steps=2,
        sweep_steps=[2],
        train_steps=CLAIM["train_steps"],
    )
    results = results["metrics"]
    for name in ("episodes.csv", "summary.csv", "table.md", "plots/episode_merge-v0.png"):
        assert (tmp_path / name).exists(), name
    episodes = pd.read_csv(tmp_path / "episodes.csv")
    assert len(episodes) == 3 * 2 * CLAIM["eval_episodes"]
    print({k: round(v, 3) for k, v in results.items()})
    assert results["bridge/success"] >= 0.2 and results["bridge/off_road"] <= 0.1
    assert results["bridge/driving_score"] >= 0.5
    assert results["bridge/ade"] <= 1.35 * results["truncated/ade"]
    assert results["bridge/anchor_accuracy"] >= 0.5  # 16 anchors: chance is about 0.06
    assert results["bridge/success"] >= results["truncated/success"] - NOISE
    assert results["bridge/success"] >= results["plain/success"] - NOISE
