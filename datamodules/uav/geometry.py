"""Pinhole cameras, rigid poses interpolated in time, and ray casting onto a LiDAR height field.

Conventions: world z is up; cameras follow OpenCV (x right, y down, z forward); a pose is the
camera-to-world rotation ``R (…, 3, 3)`` and the camera centre ``c (…, 3)``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch.nn import functional as F


@dataclass(frozen=True)
class Intrinsics:
    """A pinhole camera: focal lengths and principal point in pixels, image size."""

    fx: float
    fy: float
    cx: float
    cy: float
    width: int
    height: int

    @classmethod
    def from_fov(cls, width: int, height: int, hfov_deg: float) -> Intrinsics:
        """A camera with square pixels, centred principal point and horizontal field of view ``hfov_deg``."""
        f = 0.5 * width / torch.tan(torch.deg2rad(torch.tensor(hfov_deg / 2))).item()
        return cls(f, f, (width - 1) / 2, (height - 1) / 2, width, height)

    def pixel_directions(self, device: torch.device | None = None, supersample: int = 1) -> torch.Tensor:
        """Camera-frame ray directions ``(H, W, s², 3)`` with unit z through an s×s grid inside every pixel
        (``s = supersample``; s = 1 is the pixel centre)."""
        sub = (torch.arange(supersample, dtype=torch.float32, device=device) + 0.5) / supersample - 0.5
        v, u, dv, du = torch.meshgrid(
            torch.arange(self.height, dtype=torch.float32, device=device),
            torch.arange(self.width, dtype=torch.float32, device=device),
            sub,
            sub,
            indexing="ij",
        )
        u, v = (u + du).reshape(self.height, self.width, -1), (v + dv).reshape(self.height, self.width, -1)
        return torch.stack([(u - self.cx) / self.fx, (v - self.cy) / self.fy, torch.ones_like(u)], dim=-1)

    def project(self, points_cam: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Pixel coordinates ``(…, 2)`` and depth ``(…)`` of camera-frame points ``(…, 3)``."""
        z = points_cam[..., 2]
        uv = torch.stack(
            [self.fx * points_cam[..., 0] / z + self.cx, self.fy * points_cam[..., 1] / z + self.cy], dim=-1
        )
        return uv, z


def nadir_rotation(yaw: torch.Tensor) -> torch.Tensor:
    """Camera-to-world rotation ``(…, 3, 3)`` of a downward camera whose image top points along ``yaw``.

    ``yaw (…)`` in radians from world +x; image right is 90° clockwise of the heading, seen from above.
    """
    cos, sin = torch.cos(yaw), torch.sin(yaw)
    zero = torch.zeros_like(yaw)
    x_axis = torch.stack([sin, -cos, zero], dim=-1)  # image right
    y_axis = torch.stack([-cos, -sin, zero], dim=-1)  # image down = backwards along the heading
    z_axis = torch.stack([zero, zero, -torch.ones_like(yaw)], dim=-1)  # forward = down
    return torch.stack([x_axis, y_axis, z_axis], dim=-1)


def axis_angle_rotation(axis: torch.Tensor, angle: float) -> torch.Tensor:
    """Rotation matrix ``(3, 3)`` by ``angle`` radians about the unit vector ``axis (3,)`` (Rodrigues)."""
    axis = axis / axis.norm()
    k = torch.tensor(
        [[0.0, -axis[2], axis[1]], [axis[2], 0.0, -axis[0]], [-axis[1], axis[0], 0.0]], dtype=axis.dtype
    )
    angle_t = torch.tensor(angle, dtype=axis.dtype)
    return torch.eye(3, dtype=axis.dtype) + torch.sin(angle_t) * k + (1 - torch.cos(angle_t)) * (k @ k)


def matrix_to_quaternion(rotation: torch.Tensor) -> torch.Tensor:
    """Unit quaternions ``(…, 4)`` (w, x, y, z, w ≥ 0) of rotation matrices ``(…, 3, 3)``.

    Builds the four candidate quaternions and keeps the best-conditioned one (largest component).
    """
    m = rotation
    m00, m11, m22 = m[..., 0, 0], m[..., 1, 1], m[..., 2, 2]
    diag = torch.stack(
        [1 + m00 + m11 + m22, 1 + m00 - m11 - m22, 1 - m00 + m11 - m22, 1 - m00 - m11 + m22], dim=-1
    )
    root = diag.clamp_min(1e-12).sqrt()
    candidates = torch.stack(
        [
            torch.stack(
                [
                    root[..., 0] ** 2,
                    m[..., 2, 1] - m[..., 1, 2],
                    m[..., 0, 2] - m[..., 2, 0],
                    m[..., 1, 0] - m[..., 0, 1],
                ],
                dim=-1,
            ),
            torch.stack(
                [
                    m[..., 2, 1] - m[..., 1, 2],
                    root[..., 1] ** 2,
                    m[..., 1, 0] + m[..., 0, 1],
                    m[..., 0, 2] + m[..., 2, 0],
                ],
                dim=-1,
            ),
            torch.stack(
                [
                    m[..., 0, 2] - m[..., 2, 0],
                    m[..., 1, 0] + m[..., 0, 1],
                    root[..., 2] ** 2,
                    m[..., 2, 1] + m[..., 1, 2],
                ],
                dim=-1,
            ),
            torch.stack(
                [
                    m[..., 1, 0] - m[..., 0, 1],
                    m[..., 0, 2] + m[..., 2, 0],
                    m[..., 2, 1] + m[..., 1, 2],
                    root[..., 3] ** 2,
                ],
                dim=-1,
            ),
        ],
        dim=-2,
    ) / (2 * root[..., None])
    best = diag.argmax(dim=-1)
    quat = torch.gather(candidates, -2, best[..., None, None].expand(*best.shape, 1, 4)).squeeze(-2)
    quat = F.normalize(quat, dim=-1)
    return torch.where(quat[..., :1] < 0, -quat, quat)


def quaternion_to_matrix(quat: torch.Tensor) -> torch.Tensor:
    """Rotation matrices ``(…, 3, 3)`` of quaternions ``(…, 4)`` (w, x, y, z; normalised here)."""
    w, x, y, z = F.normalize(quat, dim=-1).unbind(-1)
    return torch.stack(
        [
            torch.stack([1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)], dim=-1),
            torch.stack([2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)], dim=-1),
            torch.stack([2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)], dim=-1),
        ],
        dim=-2,
    )


def slerp(q0: torch.Tensor, q1: torch.Tensor, alpha: torch.Tensor) -> torch.Tensor:
    """Spherical interpolation of unit quaternions ``(…, 4)`` at fractions ``alpha (…)``, shortest arc."""
    dot = (q0 * q1).sum(-1, keepdim=True)
    q1 = torch.where(dot < 0, -q1, q1)
    dot = dot.abs().clamp(max=1.0)
    theta = torch.acos(dot)
    sin_theta = torch.sin(theta)
    a = alpha[..., None]
    small = sin_theta < 1e-6  # nearly equal: linear interpolation is exact to first order
    w0 = torch.where(small, 1 - a, torch.sin((1 - a) * theta) / sin_theta.clamp_min(1e-12))
    w1 = torch.where(small, a, torch.sin(a * theta) / sin_theta.clamp_min(1e-12))
    return F.normalize(w0 * q0 + w1 * q1, dim=-1)


class Trajectory:
    """Camera poses sampled at increasing ``times (N,)``: ``rotations (N, 3, 3)``, ``centres (N, 3)``.

    ``at(t)`` interpolates (slerp for rotation, linear for position) and clamps outside the samples.
    """

    def __init__(self, times: torch.Tensor, rotations: torch.Tensor, centres: torch.Tensor) -> None:
        if times.ndim != 1 or len(times) < 2 or not bool((times[1:] > times[:-1]).all()):
            raise ValueError("a trajectory needs at least two strictly increasing pose times")
        self.times = times.contiguous()
        self.quats = matrix_to_quaternion(rotations)
        self.centres = centres

    def to(self, device: torch.device | str) -> Trajectory:
        out = Trajectory.__new__(Trajectory)
        out.times, out.quats, out.centres = (x.to(device) for x in (self.times, self.quats, self.centres))
        return out

    def at(self, t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Rotations ``(…, 3, 3)`` and centres ``(…, 3)`` at times ``t (…)``."""
        t = t.to(self.times).clamp(self.times[0], self.times[-1])
        i = torch.searchsorted(self.times, t.reshape(-1), right=True).clamp(1, len(self.times) - 1)
        t0, t1 = self.times[i - 1], self.times[i]
        alpha = (t.reshape(-1) - t0) / (t1 - t0)
        quat = slerp(self.quats[i - 1], self.quats[i], alpha)
        centre = torch.lerp(self.centres[i - 1], self.centres[i], alpha[:, None])
        return quaternion_to_matrix(quat).reshape(*t.shape, 3, 3), centre.reshape(*t.shape, 3)


def compose_extrinsics(
    rotation: torch.Tensor, centre: torch.Tensor, rel_rotation: torch.Tensor, rel_translation: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """World pose of a rigidly mounted second camera from the first camera's pose ``(…, 3, 3), (…, 3)``.

    ``rel_rotation (3, 3)`` and ``rel_translation (3,)`` are the second camera's pose in the first's frame.
    """
    return rotation @ rel_rotation, centre + (rotation @ rel_translation[:, None]).squeeze(-1)


class HeightField:
    """A height map ``heights (Hh, Wh)`` over ``bounds = (x0, x1, y0, y1)`` (metres), from LiDAR.

    Row index follows y, column index follows x; heights are bilinear between grid nodes.
    """

    def __init__(self, heights: torch.Tensor, bounds: tuple[float, float, float, float]) -> None:
        self.heights = heights
        self.bounds = tuple(float(b) for b in bounds)

    def to(self, device: torch.device | str) -> HeightField:
        return HeightField(self.heights.to(device), self.bounds)

    def grid_coords(self, xy: torch.Tensor) -> torch.Tensor:
        """``grid_sample`` coordinates in [-1, 1] of world points ``xy (…, 2)``."""
        x0, x1, y0, y1 = self.bounds
        return torch.stack([2 * (xy[..., 0] - x0) / (x1 - x0) - 1, 2 * (xy[..., 1] - y0) / (y1 - y0) - 1], -1)

    def height(self, xy: torch.Tensor) -> torch.Tensor:
        """Heights ``(…)`` at world points ``xy (…, 2)`` (edge values outside the bounds)."""
        return sample_grid(self.heights[None], self.grid_coords(xy))[0]

    def raycast(self, origins: torch.Tensor, directions: torch.Tensor, iterations: int = 4) -> torch.Tensor:
        """Ray parameters ``s (…)`` where rays ``origins + s·directions (…, 3)`` meet the surface.

        Fixed-point iteration on the height: exact for flat ground and converges wherever the slope
        seen along the ray is below one (a nadir view of a 2.5-D scene), which is what an aerial LiDAR
        DEM is.
        """
        z = torch.full_like(origins[..., 2], float(self.heights.mean()))
        for _ in range(iterations):
            s = (z - origins[..., 2]) / directions[..., 2]
            z = self.height(origins[..., :2] + s[..., None] * directions[..., :2])
        return (z - origins[..., 2]) / directions[..., 2]


def sample_grid(grid: torch.Tensor, coords: torch.Tensor) -> torch.Tensor:
    """Bilinear samples ``(C, …)`` of ``grid (C, H, W)`` at ``coords (…, 2)`` in [-1, 1] (x, y), clamped."""
    shape = coords.shape[:-1]
    out = F.grid_sample(
        grid[None], coords.reshape(1, 1, -1, 2), mode="bilinear", padding_mode="border", align_corners=True
    )
    return out.reshape(grid.shape[0], *shape)


def world_points(
    intrinsics: Intrinsics,
    rotation: torch.Tensor,
    centre: torch.Tensor,
    surface: HeightField,
    pixels: torch.Tensor | None = None,
    supersample: int = 1,
) -> torch.Tensor:
    """World points ``(…, P, 3)`` seen through ``pixels (P, 2)`` (default: all pixels, row-major, with
    ``supersample``² rays each, P = H·W·s²) of posed cameras.

    ``rotation (…, 3, 3)``, ``centre (…, 3)``: one or a batch of poses; depth comes from ``surface``.
    """
    if pixels is None:
        dirs_cam = intrinsics.pixel_directions(rotation.device, supersample).to(rotation.dtype).reshape(-1, 3)
    else:
        dirs_cam = torch.stack(
            [
                (pixels[..., 0] - intrinsics.cx) / intrinsics.fx,
                (pixels[..., 1] - intrinsics.cy) / intrinsics.fy,
                torch.ones_like(pixels[..., 0]),
            ],
            dim=-1,
        )
    dirs = dirs_cam @ rotation.transpose(-1, -2)  # (…, P, 3)
    origins = centre[..., None, :].expand_as(dirs)
    s = surface.raycast(origins, dirs)
    return origins + s[..., None] * dirs


def project_points(
    intrinsics: Intrinsics, rotation: torch.Tensor, centre: torch.Tensor, points: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Pixels ``(…, P, 2)`` and depths ``(…, P)`` of world ``points (…, P, 3)`` in posed cameras
    ``(…, 3, 3), (…, 3)``."""
    cam = (points - centre[..., None, :]) @ rotation
    return intrinsics.project(cam)
