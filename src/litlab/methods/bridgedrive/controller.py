"""Tracking controller: pure pursuit for steering plus a proportional speed loop, turning an ego-frame
plan into highway-env's continuous action ``[accel, steer]`` in [-1, 1]."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from litlab.datamodules.driving_sim import ACCELERATION_RANGE, STEERING_RANGE


@dataclass
class PurePursuit:
    """Pure pursuit on the plan polyline and a P loop on the plan's speed.

    Steering δ = atan(2 L sin α / l_d): α is the bearing of the point at arc length
    l_d = max(min_lookahead, lookahead_time · v) on the plan, L the wheelbase (highway-env's bicycle turns at
    v sin β / (length/2) with tan β = tan δ / 2, i.e. L = vehicle length). The speed target is the plan's
    speed over its first ``speed_horizon`` waypoints; accel = kp (v* - v).

    Args:
        dt: time between plan waypoints (s).
    """

    dt: float
    wheelbase: float = 5.0
    lookahead_time: float = 0.8
    min_lookahead: float = 8.0
    kp_speed: float = 3.0
    speed_horizon: int = 2

    def target_speed(self, plan: np.ndarray) -> float:
        """Mean speed along the first ``speed_horizon`` segments of ``plan: (H, 2)`` (origin prepended)."""
        path = np.vstack([np.zeros((1, 2)), plan[: self.speed_horizon]])
        return float(np.linalg.norm(np.diff(path, axis=0), axis=1).mean() / self.dt)

    def lookahead_point(self, plan: np.ndarray, distance: float) -> np.ndarray:
        """The point at arc length ``distance`` along ``plan: (H, 2)`` from the origin (extrapolated)."""
        path = np.vstack([np.zeros((1, 2)), plan])
        segment = np.linalg.norm(np.diff(path, axis=0), axis=1)
        arc = np.concatenate([[0.0], np.cumsum(segment)])
        if arc[-1] < 1e-6:
            return np.array([distance, 0.0])
        if distance >= arc[-1]:
            direction = (path[-1] - path[-2]) / max(segment[-1], 1e-6)
            return path[-1] + (distance - arc[-1]) * direction
        return np.array([np.interp(distance, arc, path[:, 0]), np.interp(distance, arc, path[:, 1])])

    def action(self, plan: np.ndarray, speed: float) -> np.ndarray:
        """``(2,)`` normalised [accel, steer] that tracks ego-frame ``plan: (H, 2)`` at ``speed`` (m/s)."""
        lookahead = max(self.min_lookahead, self.lookahead_time * speed)
        x, y = self.lookahead_point(plan, lookahead)
        sin_alpha = y / max(np.hypot(x, y), 1e-6)
        steer = np.arctan(2.0 * self.wheelbase * sin_alpha / lookahead)
        accel = self.kp_speed * (self.target_speed(plan) - speed)
        return np.clip([accel / ACCELERATION_RANGE, steer / STEERING_RANGE], -1.0, 1.0)
