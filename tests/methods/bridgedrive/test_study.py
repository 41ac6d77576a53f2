"""The study task end to end at toy size: its tables, paired differences, anchor variants and figures."""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import pytest

from litlab.methods.bridgedrive import planners as P
from litlab.methods.bridgedrive.study import seed_interval, study
from litlab.task import TaskContext

SCENES = [{"env_id": "highway-fast-v0", "duration": 5, "route_length": 50, "simulation_frequency": 15}]


def test_seed_interval_is_the_student_t_half_width() -> None:
    mean, half = seed_interval(np.array([0.2, 0.4, 0.6]))
    assert mean == pytest.approx(0.4)
    assert half == pytest.approx(4.302653 * 0.2 / np.sqrt(3), rel=1e-5)


def test_study_writes_every_arm_and_the_paired_table(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("LITLAB_CACHE", str(tmp_path / "cache"))
    output = study(
        TaskContext.local(tmp_path),
        seeds=[0, 1],
        planners={"bridge": functools.partial(P.BridgePlanner), "regression": P.RegressionPlanner},
        scenes=SCENES,
        train_episodes=3,
        eval_episodes=2,
        sweep_steps=[1, 2],
        sweep_planners=["bridge"],
        anchor_variants={"bridge_random_anchor": "random"},
        n_anchors=4,
        train_steps=5,
    )
    tables = output["tables"]
    assert [row["planner"] for row in tables["summary"]] == ["bridge", "regression", "bridge_random_anchor"]
    assert all(row["seeds"] == 2 for row in tables["summary"])
    assert {row["comparison"] for row in tables["paired"]} == {
        "bridge - regression",
        "bridge - bridge_random_anchor",
    }
    assert {(row["planner"], row["denoise_steps"]) for row in tables["sweep"]} == {
        ("bridge", 1),
        ("bridge", 2),
    }
    assert tables["paper_vs_ours"][0]["paper_SR"] == 74.99
    assert [row["scene"] for row in tables["by_scene"]] == ["highway-fast-v0"] * 3
    assert {"episode_highway-fast-v0", "sweep_success"} <= set(output["figures"])
    assert (tmp_path / "episodes.csv").exists() and (tmp_path / "open_loop.csv").exists()
