"""A ground-truth scene with vertical structure for oblique flights: building walls and tree-crown sides.

The surface is still a height map (roofs and crowns on top), but every pixel's ray is marched through it
(no 2.5-D shortcut), so oblique rays hit walls and crown sides, occlude what is behind them, and see
colours that vary with height: facades with rows of windows, crown sides darkening towards the ground.
A colour that varies with height at one (x, y) is what a texture on a DEM cannot hold.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from litlab.datamodules.uav.geometry import HeightField, Intrinsics, sample_grid
from litlab.datamodules.uav.render import GroundTexture

FACADE = (0.78, 0.74, 0.66)
WINDOW = (0.12, 0.15, 0.22)
CROWN_BASE = (0.04, 0.14, 0.04)
CROWN_TOP = (0.12, 0.34, 0.10)
FLOOR_HEIGHT = 3.0  # m between window rows
WINDOW_PITCH = 2.5  # m between window columns along a wall


def march(surface: HeightField, origins: torch.Tensor, dirs: torch.Tensor, step: float) -> torch.Tensor:
    """Ray parameters ``s (…)`` of the first hit of rays ``origins + s·dirs (…, 3)`` with the height map.

    Samples every ``step`` m of horizontal travel between the planes of the highest and lowest heights,
    then refines the first crossing by a secant step: exact on walls and slopes of any steepness, as long
    as no feature is thinner than ``step``. Rays must point down (``dirs[..., 2] < 0``).
    """
    top, bottom = float(surface.heights.max()) + 0.01, float(surface.heights.min()) - 0.01
    oz, dz = origins[..., 2], dirs[..., 2]
    s0 = ((top - oz) / dz).clamp_min(0)
    s1 = (bottom - oz) / dz
    span = (s1 - s0) * dirs[..., :2].norm(dim=-1)
    n = max(2, math.ceil(float(span.max()) / step) + 1)
    s = torch.addcmul(s0[..., None], (s1 - s0)[..., None], torch.linspace(0, 1, n, dtype=s0.dtype))
    # grid_sample coordinates of every sample, written in place (grid_coords is affine in the ray parameter)
    x0, x1, y0, y1 = surface.bounds
    coords = s.new_empty(*s.shape, 2)
    for axis, (low, high) in enumerate(((x0, x1), (y0, y1))):
        k = 2 / (high - low)
        start, slope = k * (origins[..., axis] - low) - 1, k * dirs[..., axis]
        torch.addcmul(start[..., None], s, slope[..., None], out=coords[..., axis])
    above = torch.addcmul(oz[..., None], s, dz[..., None]) - sample_grid(surface.heights[None], coords)[0]
    first = (above <= 0).to(torch.uint8).argmax(dim=-1, keepdim=True).clamp_min(1)
    a0, a1 = above.gather(-1, first - 1), above.gather(-1, first)
    sa, sb = s.gather(-1, first - 1), s.gather(-1, first)
    return (sa + (sb - sa) * a0 / (a0 - a1).clamp_min(1e-9)).squeeze(-1)


@dataclass
class StructuredScene:
    """Albedo on top surfaces, facade and crown-side colours on steep ones (``slope`` > ``wall_slope``).

    ``trees (H, W)`` in [0, 1] marks tree crowns on the height map's grid; ``step`` is the march step (m).
    ``facades=False`` colours steep surfaces by the albedo at their (x, y) instead: the same geometry with
    2.5-D colour, the control that isolates what height-varying colour costs a DEM texture.
    """

    texture: GroundTexture
    surface: HeightField
    trees: torch.Tensor
    step: float = 0.5
    wall_slope: float = 1.5
    facades: bool = True

    def hits(self, intrinsics: Intrinsics, rotation: torch.Tensor, centre: torch.Tensor, supersample: int):
        """World points ``(B, H·W·s², 3)`` where the rays of posed cameras ``(B, 3, 3), (B, 3)`` land."""
        dirs = intrinsics.pixel_directions(rotation.device, supersample).to(rotation.dtype).reshape(-1, 3)
        out = []
        for r, c in zip(rotation.reshape(-1, 3, 3), centre.reshape(-1, 3), strict=True):
            d = dirs @ r.T
            o = c.expand_as(d)
            out.append(o + march(self.surface, o, d, self.step)[:, None] * d)
        return torch.stack(out)

    def colour(self, points: torch.Tensor) -> torch.Tensor:
        """Linear RGB ``(…, 3)`` of surface ``points (…, 3)``."""
        xy, z = points[..., :2], points[..., 2]
        if not self.facades:
            return self.texture(xy)
        e = 0.1
        ex, ey = xy.new_tensor([e, 0.0]), xy.new_tensor([0.0, e])
        h = self.surface.height
        grad = torch.stack([h(xy + ex) - h(xy - ex), h(xy + ey) - h(xy - ey)], -1) / (2 * e)
        slope = grad.norm(dim=-1)
        wall = ((slope - self.wall_slope) / self.wall_slope).clamp(0, 1)[..., None]
        inside = xy + 0.3 * grad / slope.clamp_min(1e-6)[..., None]  # a step uphill: into the object
        tree = sample_grid(self.trees[None], self.surface.grid_coords(inside))[0][..., None]
        floor = torch.remainder(z / FLOOR_HEIGHT, 1.0)
        column = torch.remainder((xy[..., 0] + xy[..., 1]) / WINDOW_PITCH, 1.0)
        window = ((floor > 0.35) & (floor < 0.75) & (column > 0.25) & (column < 0.75)).float()[..., None]
        facade = torch.lerp(points.new_tensor(FACADE), points.new_tensor(WINDOW), window)
        rise = (z / 10.0).clamp(0, 1)[..., None]
        crown_side = torch.lerp(points.new_tensor(CROWN_BASE), points.new_tensor(CROWN_TOP), rise)
        side = torch.lerp(facade, crown_side, tree)
        return torch.lerp(self.texture(xy), side, wall)

    def render(
        self, intrinsics: Intrinsics, rotation: torch.Tensor, centre: torch.Tensor, supersample: int = 1
    ) -> torch.Tensor:
        """Linear RGB images ``(B, 3, H, W)``; ``supersample`` s averages s×s rays per pixel."""
        rgb = self.colour(self.hits(intrinsics, rotation, centre, supersample))
        rgb = rgb.reshape(-1, intrinsics.height * intrinsics.width, supersample**2, 3).mean(2)
        return rgb.transpose(-1, -2).reshape(-1, 3, intrinsics.height, intrinsics.width)

    def depth(self, intrinsics: Intrinsics, rotation: torch.Tensor, centre: torch.Tensor) -> torch.Tensor:
        """Z-depth maps ``(B, H, W)``."""
        points = self.hits(intrinsics, rotation, centre, 1)
        depth = ((points - centre.reshape(-1, 1, 3)) @ rotation.reshape(-1, 3, 3))[..., 2]
        return depth.reshape(-1, intrinsics.height, intrinsics.width)
