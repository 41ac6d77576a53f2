"""GTA, reconstructed: geometry-constrained timestamp alignment of the event and RGB clocks.

For a candidate offset δ (``t_event = t_rgb + δ``), the events around each RGB frame are placed in the
world with the event camera's pose at ``t_event − δ`` and the LiDAR surface, reprojected into the RGB
camera at times spread over that frame's exposure (motion compensation that also reproduces the
frame's blur), and scored against the frame's edges: a positive event should sit where log brightness
falls along the image motion. δ* minimises the mean score, coarse to fine. Baselines: no alignment
(δ = 0) and cross-correlation of event rate with frame differences.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from scipy import ndimage

from litlab.datamodules.events import UAVSequence
from litlab.datamodules.uav.geometry import HeightField, project_points, world_points
from litlab.datamodules.uav.render import luminance
from litlab.datamodules.uav.sensors import Events

GEOMETRIES = ("lidar", "flat")


@dataclass
class AlignmentResult:
    """An estimated offset (s) and the score curve of the coarse search ``offsets (D,)``, ``scores (D,)``."""

    offset: float
    offsets: torch.Tensor
    scores: torch.Tensor


def flat_ground(sequence: UAVSequence) -> UAVSequence:
    """The same flight with its LiDAR DEM replaced by a plane at the DEM's mean height (GTA's ablation)."""
    heights = sequence.surface.heights
    out = UAVSequence(**{f: getattr(sequence, f) for f in sequence.__dataclass_fields__})
    out.surface = HeightField(torch.full_like(heights, float(heights.mean())), sequence.surface.bounds)
    out.key = None
    return out


def edge_gradients(frames: torch.Tensor, smooth: float = 1.0, dark: float = 0.01) -> torch.Tensor:
    """Log-luminance Sobel gradients ``(K, 2, H, W)`` (x, y) of ``frames (K, 3, H, W)``, each frame
    divided by its mean gradient magnitude; a Gaussian of ``smooth`` px first tames low-light noise."""
    gray = ndimage.gaussian_filter(luminance(frames)[:, 0].cpu().numpy(), sigma=(0, smooth, smooth))
    log_gray = np.log(gray + dark)
    gx, gy = ndimage.sobel(log_gray, axis=2), ndimage.sobel(log_gray, axis=1)
    scale = np.hypot(gx, gy).mean(axis=(1, 2))[:, None, None, None] + 1e-12
    return torch.from_numpy(np.stack([gx, gy], axis=1) / scale).float()


def compensate_latency(events: Events, fraction: float = 0.5, max_gap: float = 0.01) -> Events:
    """Events re-stamped ``fraction`` of the gap to the pixel's previous same-polarity event earlier.

    A pixel fires only after its log intensity has moved a full threshold, so on a moving edge its
    events trail the edge by about half the interval between them; gaps over ``max_gap`` are left alone.
    """
    pixel = (events.y * (int(events.x.max()) + 1) + events.x).cpu().numpy() if len(events) else np.zeros(0)
    order = torch.from_numpy(np.lexsort((events.t.cpu().numpy(), pixel))).to(events.t.device)
    t, p, px = events.t[order], events.p[order], torch.from_numpy(pixel).to(events.t.device)[order]
    gap = t[1:] - t[:-1]
    same = (px[1:] == px[:-1]) & (p[1:] == p[:-1]) & (gap < max_gap)
    shift = torch.zeros_like(t)
    shift[order[1:]] = torch.where(same, fraction * gap, torch.zeros_like(gap))
    restamped = events.t - shift
    resort = torch.argsort(restamped, stable=True)
    return Events(events.x[resort], events.y[resort], restamped[resort], events.p[resort])


def frame_event_indices(
    event_t: torch.Tensor, centres: torch.Tensor, half_window: float, stride: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Indices of every ``stride``-th event within ``half_window`` of each time in ``centres (K,)``,
    and the frame each belongs to (both ``(M,)``)."""
    bounds = torch.stack([centres - half_window, centres + half_window], dim=-1).to(event_t.dtype)
    lo, hi = torch.searchsorted(event_t, bounds).unbind(-1)
    lo, hi = (lo + stride - 1) // stride, (hi + stride - 1) // stride  # multiples of stride inside
    count = (hi - lo).clamp_min(0)
    frame = torch.repeat_interleave(torch.arange(len(centres), device=event_t.device), count)
    start = torch.cumsum(count, 0) - count
    k = torch.arange(int(count.sum()), device=event_t.device) - torch.repeat_interleave(start, count)
    return (torch.repeat_interleave(lo, count) + k) * stride, frame


def sample_per_frame(maps: torch.Tensor, uv: torch.Tensor, frame: torch.Tensor) -> torch.Tensor:
    """Bilinear samples ``(M, S, C)`` of ``maps (K, C, H, W)`` at pixels ``uv (M, S, 2)``; row m reads
    map ``frame[m]``."""
    k, c, h, w = maps.shape
    x, y = uv[..., 0].clamp(0, w - 1), uv[..., 1].clamp(0, h - 1)
    x0, y0 = x.floor().clamp(max=w - 2), y.floor().clamp(max=h - 2)
    fx, fy = (x - x0)[..., None], (y - y0)[..., None]
    flat = maps.permute(0, 2, 3, 1).reshape(k, h * w, c)
    base, x0, y0 = frame[:, None].expand_as(x0), x0.long(), y0.long()

    def at(yy: torch.Tensor, xx: torch.Tensor) -> torch.Tensor:
        return flat[base, yy * w + xx]

    top = at(y0, x0) * (1 - fx) + at(y0, x0 + 1) * fx
    bottom = at(y0 + 1, x0) * (1 - fx) + at(y0 + 1, x0 + 1) * fx
    return top * (1 - fy) + bottom * fy


def gta_score(
    sequence: UAVSequence,
    offset: float,
    gradients: torch.Tensor,
    window: float = 0.01,
    exposure_samples: int = 5,
    stride: int = 2,
) -> float:
    """Mean polarity-signed edge agreement of the events reprojected under ``offset`` (s); lower is better.

    Events within ``window/2`` of ``frame_time + offset`` (event clock), every ``stride``-th, are cast
    onto the LiDAR surface from the event camera's pose at ``t − offset`` and projected into the RGB
    camera at ``exposure_samples`` times over the exposure. Each sample scores ``p · (∇log I · v̂)``,
    ``∇log I`` from ``gradients (K, 2, H, W)`` (``edge_gradients``) and ``v̂`` the image motion there.
    """
    events = sequence.events
    index, frame = frame_event_indices(events.t, sequence.frame_times.double() + offset, window / 2, stride)
    if len(index) == 0:
        return 0.0
    rotation, centre = sequence.event_pose((events.t[index] - offset).float())
    pixels = torch.stack([events.x[index], events.y[index]], dim=-1).float()[:, None]  # (M, 1, 2)
    points = world_points(sequence.event_intrinsics, rotation, centre, sequence.surface, pixels)  # (M, 1, 3)
    u = torch.linspace(-0.5, 0.5, exposure_samples) * sequence.exposure
    times = sequence.frame_times[:, None] + torch.cat([u, u[-1:] + 1e-3])  # the last one gives the motion
    rgb_rotation, rgb_centre = sequence.rgb_pose(times)  # (K, S + 1, 3, 3)
    uv, _ = project_points(
        sequence.rgb_intrinsics,
        rgb_rotation[frame],
        rgb_centre[frame],
        points[:, None].expand(-1, len(u) + 1, 1, 3),
    )
    uv = uv[:, :, 0]  # (M, S + 1, 2)
    motion = torch.nn.functional.normalize(uv[:, -1] - uv[:, -2], dim=-1)  # (M, 2)
    uv = uv[:, :-1]
    k = sequence.rgb_intrinsics
    inside = (
        (uv[..., 0] >= 0) & (uv[..., 0] <= k.width - 1) & (uv[..., 1] >= 0) & (uv[..., 1] <= k.height - 1)
    )
    along = (sample_per_frame(gradients, uv, frame) * motion[:, None]).sum(-1)  # (M, S)
    signed = events.p[index].float()[:, None] * along
    return float(signed[inside].mean()) if inside.any() else 0.0


def coarse_to_fine(
    score: Callable[[float], float],
    search: float = 0.05,
    coarse_step: float = 0.001,
    fine_step: float = 0.0001,
    coarse: Callable[[float], float] | None = None,
) -> AlignmentResult:
    """Minimise ``score`` over [−search, search]: a coarse grid (scored by ``coarse``, default ``score``),
    a fine grid around its best point, then a parabola through the fine minimum and its neighbours."""
    coarse_score = coarse or score
    grid = torch.arange(-search, search + coarse_step / 2, coarse_step, dtype=torch.float64)
    coarse_scores = torch.tensor([coarse_score(float(d)) for d in grid])
    best = float(grid[coarse_scores.argmin()])
    fine = best + torch.arange(-coarse_step, coarse_step + fine_step / 2, fine_step, dtype=torch.float64)
    fine_scores = torch.tensor([score(float(d)) for d in fine])
    i = int(fine_scores.argmin().clamp(1, len(fine) - 2))
    s0, s1, s2 = fine_scores[i - 1 : i + 2].tolist()
    curvature = s0 - 2 * s1 + s2
    shift = 0.5 * (s0 - s2) / curvature if curvature > 0 else 0.0
    offset = float(fine[i]) + max(-1.0, min(1.0, shift)) * fine_step
    return AlignmentResult(offset, grid, coarse_scores)


def estimate_offset_gta(
    sequence: UAVSequence,
    search: float = 0.05,
    coarse_step: float = 0.001,
    window: float = 0.01,
    exposure_samples: int = 5,
    stride: int = 2,
    coarse_stride: int = 8,
    latency_fraction: float = 0.5,
    geometry: str = "lidar",
) -> AlignmentResult:
    """GTA's offset estimate (s): argmin of ``gta_score`` over [−search, search], coarse to 0.1 ms, then
    a parabola. The coarse grid scores every ``coarse_stride``-th event, the fine one every ``stride``-th.
    ``latency_fraction`` > 0 first corrects the events' firing lag (``compensate_latency``).
    ``geometry="flat"`` is the ablation without LiDAR: events are placed on a plane at the DEM's mean height.
    """
    if geometry not in GEOMETRIES:
        raise ValueError(f"geometry must be one of {GEOMETRIES}, got {geometry!r}")
    if geometry == "flat":
        sequence = flat_ground(sequence)
    gradients = edge_gradients(sequence.frames)
    if latency_fraction > 0:
        sequence = sequence.with_events(compensate_latency(sequence.events, latency_fraction))

    def score(offset: float, every: int) -> float:
        return gta_score(sequence, offset, gradients, window, exposure_samples, every)

    return coarse_to_fine(
        lambda d: score(d, stride), search, coarse_step, coarse=lambda d: score(d, coarse_stride)
    )


def estimate_offset_xcorr(
    sequence: UAVSequence, search: float = 0.05, coarse_step: float = 0.001
) -> AlignmentResult:
    """Baseline: the offset that best correlates the event count between consecutive frames with the
    mean absolute difference of those frames (a time-only cue, no geometry)."""
    gray = luminance(sequence.frames)[:, 0]
    change = (gray[1:] - gray[:-1]).abs().mean(dim=(1, 2)).double()
    times = sequence.frame_times.double()

    def negative_correlation(offset: float) -> float:
        edges = torch.searchsorted(sequence.events.t, times + offset)
        counts = (edges[1:] - edges[:-1]).double()
        return -float(torch.corrcoef(torch.stack([counts, change]))[0, 1].nan_to_num(0.0))

    return coarse_to_fine(negative_correlation, search, coarse_step)
