"""Frames and waypoints: world <-> ego frame and ego-frame future waypoints of a log.

The ego frame has x along the heading and y at +90° from it; in highway-env (world y toward the
higher-index, right-hand lanes) that is y to the right of the driver.
"""

from __future__ import annotations

import numpy as np


def to_ego(points: np.ndarray, pose: np.ndarray) -> np.ndarray:
    """World ``points: (..., 2)`` in the frame of ``pose = (x, y, heading, ...)``."""
    c, s = np.cos(pose[2]), np.sin(pose[2])
    d = points - pose[:2]
    return np.stack([c * d[..., 0] + s * d[..., 1], -s * d[..., 0] + c * d[..., 1]], axis=-1)


def to_world(points: np.ndarray, pose: np.ndarray) -> np.ndarray:
    """Ego-frame ``points: (..., 2)`` of ``pose`` back in the world frame (inverse of ``to_ego``)."""
    c, s = np.cos(pose[2]), np.sin(pose[2])
    x, y = points[..., 0], points[..., 1]
    return np.stack([c * x - s * y, s * x + c * y], axis=-1) + pose[:2]


def future_waypoints(poses: np.ndarray, horizon: int, stride: int) -> np.ndarray:
    """``(T - horizon*stride, horizon, 2)``: for each step t of a log ``poses: (T, >=3)`` the positions at
    t + stride, ..., t + horizon*stride in the ego frame of step t."""
    n = len(poses) - horizon * stride
    if n <= 0:
        return np.zeros((0, horizon, 2))
    index = np.arange(n)[:, None] + stride * np.arange(1, horizon + 1)[None, :]  # (n, H)
    d = poses[index, :2] - poses[:n, None, :2]
    c, s = np.cos(poses[:n, 2])[:, None], np.sin(poses[:n, 2])[:, None]
    return np.stack([c * d[..., 0] + s * d[..., 1], -s * d[..., 0] + c * d[..., 1]], axis=-1)
