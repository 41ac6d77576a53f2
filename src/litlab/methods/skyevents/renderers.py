"""The scene representations a SkyEvents reconstruction trains: a texture on the LiDAR DEM, or 3D
Gaussians initialised from the LiDAR surface (the representation of the paper's 3DGS baselines).

Both render posed views ``(B, 3, H, W)`` in linear RGB through ``forward(intrinsics, rotation, centre,
supersample)`` and give the optimizer their parameter groups; the Gaussians also grow and prune
themselves between steps (``after_backward``, ``after_step``).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from litlab.datamodules.events import UAVSequence
from litlab.datamodules.uav.geometry import HeightField, Intrinsics, project_points, sample_grid
from litlab.datamodules.uav.render import GroundTexture, render
from litlab.kernels.gaussian_splatting import Camera
from litlab.methods.skyevents.splats import DensityControl, GaussianScene

# 3DGS's learning rates (Kerbl et al., 2023); the means' is multiplied by the scene extent
SPLAT_LEARNING_RATES = {
    "means": 1.6e-4,
    "sh": 2.5e-3,
    "opacity_logits": 5e-2,
    "log_scales": 5e-3,
    "quaternions": 1e-3,
}


class TextureScene(nn.Module):
    """Linear albedo texels of size ``texel`` (m) over the flight's ground, draped on its LiDAR DEM."""

    def __init__(self, sequence: UAVSequence, texel: float) -> None:
        super().__init__()
        x0, x1, y0, y1 = sequence.texture_bounds
        self.texture = GroundTexture(
            sequence.texture_bounds, round((y1 - y0) / texel), round((x1 - x0) / texel)
        )
        self.surface = sequence.surface

    def forward(
        self, intrinsics: Intrinsics, rotation: Tensor, centre: Tensor, supersample: int = 1
    ) -> Tensor:
        return render(self.texture, self.surface, intrinsics, rotation, centre, supersample)

    def parameter_groups(self) -> list[dict[str, Any]]:
        """One group at the optimizer's own learning rate."""
        return [{"params": list(self.parameters())}]

    def after_backward(self) -> None:
        """Nothing to record."""

    def after_step(
        self, optimizer: torch.optim.Optimizer, step: int, total_steps: int | None = None
    ) -> dict[str, int]:
        """Nothing to adapt."""
        return {}


class SplatScene(nn.Module):
    """Gaussians on the LiDAR surface every ``spacing`` m, coloured from the frames that see them, with SH
    colour of ``sh_degree`` and 3DGS's adaptive density control (``density``: ``DensityControl`` fields).

    ``wall_fill`` also places points every ``spacing`` m down the DEM's steep drops (the walls an oblique
    LiDAR or SfM would return); ``seen_only`` keeps only points some frame sees (as SfM points are);
    ``opacity`` is every Gaussian's initial opacity (3DGS: 0.1).
    """

    def __init__(
        self,
        sequence: UAVSequence,
        spacing: float,
        sh_degree: int = 1,
        density: dict[str, Any] | None = None,
        learning_rates: dict[str, float] | None = None,
        wall_fill: bool = False,
        seen_only: bool = False,
        opacity: float = 0.1,
    ) -> None:
        super().__init__()
        points = surface_points(sequence.surface, spacing)
        if wall_fill:
            points = torch.cat([points, wall_points(sequence.surface, spacing)])
        colours, seen = point_colours(sequence, points, with_seen=True)
        if seen_only:
            points, colours = points[seen], colours[seen]
        self.gaussians = GaussianScene(points, colours, degree=sh_degree, opacity=opacity)
        self.control = DensityControl(**(density or {}))
        self.learning_rates = {**SPLAT_LEARNING_RATES, **(learning_rates or {})}

    def forward(
        self, intrinsics: Intrinsics, rotation: Tensor, centre: Tensor, supersample: int = 1
    ) -> Tensor:
        """Each view rendered alone; ``supersample`` s renders s× the pixels and averages s×s blocks."""
        s = supersample
        cameras = [
            Camera(
                r,
                c,
                intrinsics.fx * s,
                intrinsics.fy * s,
                intrinsics.cx * s + (s - 1) / 2,
                intrinsics.cy * s + (s - 1) / 2,
                intrinsics.width * s,
                intrinsics.height * s,
            )
            for r, c in zip(rotation.reshape(-1, 3, 3), centre.reshape(-1, 3), strict=True)
        ]
        images = torch.stack([self.gaussians.render(camera)[0] for camera in cameras])
        return nn.functional.avg_pool2d(images, s) if s > 1 else images

    def parameter_groups(self) -> list[dict[str, Any]]:
        """One group per parameter at 3DGS's rates (the means' scaled by the scene's extent)."""
        extent = {"means": self.gaussians.extent}
        return [
            {"params": [getattr(self.gaussians, name)], "lr": rate * extent.get(name, 1.0), "name": name}
            for name, rate in self.learning_rates.items()
        ]

    def after_backward(self) -> None:
        self.gaussians.accumulate_gradients()

    def after_step(
        self, optimizer: torch.optim.Optimizer, step: int, total_steps: int | None = None
    ) -> dict[str, int]:
        return self.gaussians.adapt(optimizer, self.control, step, total_steps)


def surface_points(surface: HeightField, spacing: float) -> Tensor:
    """World points ``(N, 3)`` on a ``spacing`` grid over the height field's bounds, at its heights."""
    x0, x1, y0, y1 = surface.bounds
    xs = torch.arange(x0 + spacing / 2, x1, spacing)
    ys = torch.arange(y0 + spacing / 2, y1, spacing)
    xy = torch.stack(torch.meshgrid(xs, ys, indexing="xy"), -1).reshape(-1, 2)
    return torch.cat([xy, surface.height(xy)[:, None]], -1)


def wall_points(surface: HeightField, spacing: float) -> Tensor:
    """Points ``(M, 3)`` every ``spacing`` m down each drop of more than ``spacing`` between neighbouring
    ``surface_points``, halfway between the two (the DEM's walls, which a nadir grid samples once)."""
    top = surface_points(surface, spacing)
    rows = []
    for step in top.new_tensor([[spacing, 0.0], [-spacing, 0.0], [0.0, spacing], [0.0, -spacing]]):
        below = surface.height(top[:, :2] + step)
        count = ((top[:, 2] - below) / spacing).floor().clamp_min(0).long()
        owner = torch.repeat_interleave(torch.arange(len(top)), count)
        level = torch.arange(int(count.sum())) - torch.repeat_interleave(count.cumsum(0) - count, count)
        xy = top[owner, :2] + step / 2
        rows.append(torch.cat([xy, (top[owner, 2] - (level + 0.5) * spacing)[:, None]], -1))
    return torch.cat(rows)


def point_colours(
    sequence: UAVSequence, points: Tensor, with_seen: bool = False
) -> Tensor | tuple[Tensor, Tensor]:
    """``(N, 3)``: each point's mean colour over the frames whose image it falls in (0.5 where none);
    with ``with_seen``, also whether any frame sees it ``(N,)``."""
    rotation, centre = sequence.rgb_pose(sequence.frame_times)
    k = sequence.rgb_intrinsics
    pixels, depth = project_points(k, rotation, centre, points.expand(len(rotation), -1, -1))  # (K, N, ·)
    inside = (depth > 0) & (pixels[..., 0] >= 0) & (pixels[..., 0] <= k.width - 1)
    inside &= (pixels[..., 1] >= 0) & (pixels[..., 1] <= k.height - 1)
    coords = torch.stack(
        [2 * pixels[..., 0] / (k.width - 1) - 1, 2 * pixels[..., 1] / (k.height - 1) - 1], -1
    )
    colours = torch.stack([sample_grid(frame, xy) for frame, xy in zip(sequence.frames, coords, strict=True)])
    weights = inside.float()[:, None]  # (K, 1, N)
    seen = weights.sum(0)
    mean = (colours * weights).sum(0) / seen.clamp_min(1)
    colours = torch.where(seen > 0, mean, torch.full_like(mean, 0.5)).T
    return (colours, seen[0] > 0) if with_seen else colours
