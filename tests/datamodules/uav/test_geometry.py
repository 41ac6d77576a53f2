"""Cameras, rotations, pose interpolation and ray casting against closed forms."""

from __future__ import annotations

import math

import torch

from litlab.datamodules.uav.geometry import (
    HeightField,
    Intrinsics,
    Trajectory,
    axis_angle_rotation,
    matrix_to_quaternion,
    nadir_rotation,
    project_points,
    quaternion_to_matrix,
    slerp,
    world_points,
)


def test_quaternion_round_trip_and_proper_rotations() -> None:
    torch.manual_seed(0)
    rotations = torch.stack([axis_angle_rotation(torch.randn(3), a) for a in (0.0, 0.5, 2.0, 3.1, -2.5)])
    assert torch.allclose(quaternion_to_matrix(matrix_to_quaternion(rotations)), rotations, atol=1e-5)
    nadir = nadir_rotation(torch.tensor([0.0, 0.7]))
    assert torch.allclose(torch.linalg.det(nadir), torch.ones(2), atol=1e-6)
    assert torch.allclose(nadir[0, :, 2], torch.tensor([0.0, 0.0, -1.0]))  # looks down
    assert torch.allclose(nadir[0, :, 1], torch.tensor([-1.0, 0.0, 0.0]), atol=1e-6)  # image top = heading +x


def test_slerp_halfway_is_half_the_angle() -> None:
    axis = torch.tensor([0.0, 0.0, 1.0])
    q0, q1 = matrix_to_quaternion(torch.eye(3)), matrix_to_quaternion(axis_angle_rotation(axis, 1.2))
    mid = quaternion_to_matrix(slerp(q0, q1, torch.tensor(0.5)))
    assert torch.allclose(mid, axis_angle_rotation(axis, 0.6), atol=1e-5)


def test_trajectory_interpolates_between_samples() -> None:
    times = torch.tensor([0.0, 1.0])
    rotations = nadir_rotation(torch.tensor([0.0, 0.4]))
    centres = torch.tensor([[0.0, 0.0, 50.0], [10.0, 2.0, 50.0]])
    rotation, centre = Trajectory(times, rotations, centres).at(torch.tensor([0.25, 1.0]))
    assert torch.allclose(centre[0], torch.tensor([2.5, 0.5, 50.0]))
    assert torch.allclose(rotation[0], nadir_rotation(torch.tensor(0.1)), atol=1e-5)
    assert torch.allclose(rotation[1], rotations[1], atol=1e-5)


def test_raycast_hits_a_tilted_plane_exactly() -> None:
    # z = 0.1·x + 2 over [-100, 100]²: bilinear heights are exact on a plane; slope·tan(view) < 1.
    xs = torch.linspace(-100, 100, 21)
    surface = HeightField((0.1 * xs + 2)[None, :].expand(21, 21).clone(), (-100, 100, -100, 100))
    k = Intrinsics.from_fov(12, 8, 60.0)
    rotation, centre = nadir_rotation(torch.tensor([0.3])), torch.tensor([[5.0, -3.0, 60.0]])
    points = world_points(k, rotation, centre, surface)[0]
    assert torch.allclose(points[:, 2], 0.1 * points[:, 0] + 2, atol=1e-3)
    uv, depth = project_points(k, rotation, centre, points[None])
    v, u = torch.meshgrid(torch.arange(8.0), torch.arange(12.0), indexing="ij")
    assert torch.allclose(uv[0], torch.stack([u, v], -1).reshape(-1, 2), atol=1e-3)
    assert bool((depth > 0).all())


def test_fov_sets_the_focal_length() -> None:
    k = Intrinsics.from_fov(64, 48, 90.0)
    assert math.isclose(k.fx, 32.0, rel_tol=1e-6) and k.cx == 31.5 and k.cy == 23.5
