"""Geometry, the tracking controller in highway-env (straight and lane change), and the expert data."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from litlab.core.errors import LitlabError
from litlab.datamodules.driving import DrivingDataModule, expert_episode
from litlab.datamodules.driving_geometry import future_waypoints, to_ego, to_world
from litlab.datamodules.driving_sim import SceneConfig, apply_action, make_env, observation_dim
from litlab.methods.bridgedrive.controller import PurePursuit

EMPTY_ROAD = SceneConfig(vehicles_count=0, duration=8.0, extra={"initial_lane_id": 1})


def test_frames_are_inverse_and_waypoints_match_a_loop() -> None:
    rng = np.random.default_rng(0)
    poses = np.cumsum(rng.normal(size=(30, 3)), axis=0)
    points = rng.normal(size=(5, 2))
    np.testing.assert_allclose(to_world(to_ego(points, poses[3]), poses[3]), points)
    waypoints = future_waypoints(poses, horizon=4, stride=2)
    assert waypoints.shape == (22, 4, 2)
    for t in (0, 7, 21):
        expected = [to_ego(poses[t + 2 * k, :2], poses[t]) for k in range(1, 5)]
        np.testing.assert_allclose(waypoints[t], expected)


def drive(reference_lateral: float, speed: float) -> tuple[np.ndarray, object]:
    """Track a world reference (straight, or an S-curve to ``reference_lateral``) on an empty road."""
    env = make_env(EMPTY_ROAD)
    env.reset(seed=0)
    controller = PurePursuit(dt=0.4)
    start = env.vehicle.position.copy()
    lateral = []
    for _ in range(EMPTY_ROAD.max_steps):
        vehicle = env.vehicle
        x = vehicle.position[0] + speed * 0.4 * np.arange(1, 9)
        progress = np.clip((x - start[0] - 20.0) / 40.0, 0, 1)
        y = start[1] + reference_lateral * (3 * progress**2 - 2 * progress**3)
        plan = to_ego(np.stack([x, y], axis=1), np.array([*vehicle.position, vehicle.heading]))
        apply_action(env, controller.action(plan, vehicle.speed))
        env.step(None)
        lateral.append(env.vehicle.position[1] - start[1])
    return np.array(lateral), env.vehicle


def test_controller_tracks_a_straight_plan_and_its_speed() -> None:
    lateral, vehicle = drive(0.0, speed=28.0)
    assert np.abs(lateral).max() < 0.05
    assert vehicle.speed == pytest.approx(28.0, abs=0.5)
    assert vehicle.on_road and not vehicle.crashed


def test_controller_tracks_a_lane_change_plan() -> None:
    lateral, vehicle = drive(4.0, speed=25.0)  # lane width 4 m: lane 1 -> lane 2
    assert vehicle.lane_index[2] == 2
    assert lateral[-1] == pytest.approx(4.0, abs=0.3)
    assert np.abs(np.diff(lateral)).max() < 1.0  # smooth, no swerve
    assert vehicle.on_road and not vehicle.crashed and abs(vehicle.heading) < 0.05


@pytest.mark.parametrize("env_id", ["highway-fast-v0", "merge-v0"])
def test_expert_episode_logs_observations_and_future_waypoints(env_id: str) -> None:
    scene = SceneConfig(env_id=env_id, duration=6.0)
    obs, plan = expert_episode(scene, seed=3, horizon=8, stride=2)
    assert obs.shape == (len(plan), observation_dim(scene.n_vehicles)) and plan.shape[1:] == (8, 2)
    assert len(plan) == scene.max_steps + 1 - 16
    speed = np.linalg.norm(np.diff(plan, axis=1), axis=-1) / 0.4
    assert 10 < speed.mean() < 40  # plausible highway speeds in m/s


def test_datamodule_collects_caches_and_splits_by_episode(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("LITLAB_CACHE", str(tmp_path))
    scenes = [{"duration": 5.0}, {"env_id": "merge-v0", "duration": 5.0}]
    dm = DrivingDataModule(scenes, episodes=2, val_fraction=0.25, batch_size=8)
    dm.setup("fit")
    cached = list((tmp_path / "driving").glob("expert_*.npz"))
    assert len(cached) == 1
    obs, plan = next(iter(dm.train_dataloader()))
    assert obs.shape == (8, dm.obs_dim) and plan.shape == (8, 8, 2)
    assert len(dm.train_set) + len(dm.val_set) == 4 * (25 + 1 - 16)
    mtime = cached[0].stat().st_mtime
    DrivingDataModule(scenes, episodes=2, batch_size=8).setup("fit")
    assert cached[0].stat().st_mtime == mtime  # reused, not recollected
    with pytest.raises(LitlabError, match="not found"):
        DrivingDataModule(scenes, path=str(tmp_path / "missing.npz"), batch_size=8).setup("fit")
