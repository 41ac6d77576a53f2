"""highway-env scenes for BridgeDrive: environment factory, ego-frame observations, the IDM+MOBIL expert.

Everything here is plain numpy on top of highway-env (no torch, no rendering). The ego is a kinematic
bicycle (``Vehicle``) that we drive by setting its ``{acceleration, steering}`` action directly, which is
what ``ContinuousAction`` does, so one code path serves the expert (an ``IDMVehicle`` in the ego's place)
and the planners.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np

os.environ.setdefault("SDL_VIDEODRIVER", "dummy")  # headless: highway-env imports pygame

from highway_env.envs.common.abstract import AbstractEnv  # noqa: E402
from highway_env.envs.highway_env import HighwayEnvFast  # noqa: E402
from highway_env.envs.merge_env import MergeEnv  # noqa: E402
from highway_env.vehicle.behavior import IDMVehicle  # noqa: E402
from highway_env.vehicle.kinematics import Vehicle  # noqa: E402

from litlab.core.errors import LitlabError  # noqa: E402

N_FEATURES = 7  # per vehicle: presence, x, y, vx, vy, cos dh, sin dh (ego frame)
N_EGO_FEATURES = 6  # speed, cos h, sin h, lateral offset, lanes to the left, lanes to the right, ...
POSITION_SCALE, SPEED_SCALE = 50.0, 20.0
ACCELERATION_RANGE, STEERING_RANGE = 5.0, np.pi / 4  # ContinuousAction's [-1, 1] maps to these


class _OwnObservation:
    """Skip highway-env's (pandas) observation each step: planners read the road through ``observe``."""

    def define_spaces(self) -> None:
        super().define_spaces()
        self.observation_type.observe = lambda: None


class FastHighwayEnv(_OwnObservation, HighwayEnvFast):
    """``highway-fast-v0`` without the per-step highway-env observation."""


class ContinuousMergeEnv(_OwnObservation, MergeEnv):
    """``merge-v0`` whose reward accepts continuous (or no) actions; upstream tests ``action in [0, 2]``."""

    def _rewards(self, action: object) -> dict[str, float]:
        return super()._rewards(-1)


ENVIRONMENTS: dict[str, type[AbstractEnv]] = {
    "highway-fast-v0": FastHighwayEnv,
    "merge-v0": ContinuousMergeEnv,
}


@dataclass
class SceneConfig:
    """One simulator setting. ``route_length`` is the distance (m) that counts as a finished route."""

    env_id: str = "highway-fast-v0"
    vehicles_count: int = 10
    vehicles_density: float = 1.5
    lanes_count: int = 3
    duration: float = 15.0
    policy_frequency: int = 5
    simulation_frequency: int = 5
    route_length: float = 300.0
    n_vehicles: int = 8
    extra: dict = field(default_factory=dict)

    @property
    def dt(self) -> float:
        return 1.0 / self.policy_frequency

    @property
    def max_steps(self) -> int:
        return int(round(self.duration * self.policy_frequency))


def make_env(scene: SceneConfig) -> AbstractEnv:
    """A headless highway-env environment for ``scene`` (continuous-action ego, off-road ends the episode)."""
    if scene.env_id not in ENVIRONMENTS:
        raise LitlabError(f"env_id={scene.env_id!r} is not supported; choose one of {sorted(ENVIRONMENTS)}")
    if scene.simulation_frequency % scene.policy_frequency:
        raise LitlabError("simulation_frequency must be a multiple of policy_frequency")
    config = {
        "action": {"type": "ContinuousAction"},
        "observation": {"type": "Kinematics", "vehicles_count": 1},  # never computed (_OwnObservation)
        "policy_frequency": scene.policy_frequency,
        "simulation_frequency": scene.simulation_frequency,
        "duration": scene.duration,
        "vehicles_count": scene.vehicles_count,
        "vehicles_density": scene.vehicles_density,
        "lanes_count": scene.lanes_count,
        "offroad_terminal": True,
        **scene.extra,
    }
    return ENVIRONMENTS[scene.env_id](config=config)


def ego_features(vehicle: Vehicle) -> np.ndarray:
    """``(N_EGO_FEATURES,)``: speed, heading (cos, sin) relative to the lane, lateral offset in the lane,
    and how many lanes lie to the left and right (what the planner needs to stay on the road)."""
    lane_index = vehicle.lane_index
    lane = vehicle.road.network.get_lane(lane_index)
    longitudinal, lateral = lane.local_coordinates(vehicle.position)
    relative_heading = vehicle.heading - lane.heading_at(longitudinal)
    side = vehicle.road.network.all_side_lanes(lane_index)
    lane_id = lane_index[2]
    left, right = lane_id, len(side) - 1 - lane_id
    return np.array(
        [
            vehicle.speed / SPEED_SCALE,
            np.cos(relative_heading),
            np.sin(relative_heading),
            lateral / 4.0,
            left,
            right,
        ],
        dtype=np.float32,
    )


def observe(vehicle: Vehicle, n_vehicles: int) -> np.ndarray:
    """``(N_EGO_FEATURES + n_vehicles * N_FEATURES,)`` ego features then the ``n_vehicles`` nearest others
    (and obstacles) in the ego frame (``geometry``), zero rows with presence 0 when fewer are near."""
    others = [v for v in vehicle.road.vehicles + vehicle.road.objects if v is not vehicle]
    table = np.zeros((n_vehicles, N_FEATURES), dtype=np.float32)
    if others:
        position = np.array([v.position for v in others]) - vehicle.position
        velocity = np.array([v.velocity for v in others]) - vehicle.velocity
        heading = np.array([getattr(v, "heading", 0.0) for v in others]) - vehicle.heading
        c, s = np.cos(vehicle.heading), np.sin(vehicle.heading)
        rotation = np.array([[c, s], [-s, c]])  # world -> ego frame
        position, velocity = position @ rotation.T, velocity @ rotation.T
        nearest = np.argsort(np.hypot(*position.T))[:n_vehicles]
        rows = np.column_stack(
            [
                np.ones(len(nearest)),
                position[nearest] / POSITION_SCALE,
                velocity[nearest] / SPEED_SCALE,
                np.cos(heading[nearest]),
                np.sin(heading[nearest]),
            ]
        )
        table[: len(nearest)] = rows
    return np.concatenate([ego_features(vehicle), table.reshape(-1)])


def observation_dim(n_vehicles: int) -> int:
    """Length of ``observe``'s vector."""
    return N_EGO_FEATURES + n_vehicles * N_FEATURES


def install_expert(env: AbstractEnv, rng: np.random.Generator) -> IDMVehicle:
    """Replace the ego by an IDM+MOBIL vehicle with random politeness, desired speed and lane-change gain.

    The randomised driver makes lane choices (keep, left, right) multimodal across episodes.
    """
    ego = env.vehicle
    expert = IDMVehicle(
        env.road, ego.position, ego.heading, ego.speed, target_speed=float(rng.uniform(20, 32))
    )
    expert.POLITENESS = float(rng.uniform(0.0, 0.5))
    expert.LANE_CHANGE_MIN_ACC_GAIN = float(rng.uniform(0.05, 0.5))
    expert.timer = float(rng.uniform(0, expert.LANE_CHANGE_DELAY))
    env.road.vehicles[env.road.vehicles.index(ego)] = expert
    env.controlled_vehicles[0] = expert
    return expert


def apply_action(env: AbstractEnv, action: np.ndarray) -> None:
    """Set the ego's continuous action ``[accel, steer]`` in [-1, 1] (ContinuousAction's mapping)."""
    accel, steer = np.clip(action, -1.0, 1.0)
    env.vehicle.act(
        {"acceleration": float(accel * ACCELERATION_RANGE), "steering": float(steer * STEERING_RANGE)}
    )


def pose(vehicle: Vehicle) -> np.ndarray:
    """``(4,)`` world x, y, heading, speed."""
    return np.array([*vehicle.position, vehicle.heading, vehicle.speed], dtype=np.float64)


def is_off_road(vehicle: Vehicle) -> bool:
    """True when the ego has left every lane (highway-env's ``on_road``)."""
    return not vehicle.on_road
