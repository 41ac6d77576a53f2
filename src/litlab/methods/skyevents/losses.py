"""Losses: blur-aware RGB, a whole-frame event loss, and RER (reconstructed) with its overlap mask."""

from __future__ import annotations

import torch
from torch.nn import functional as F

from litlab.datamodules.uav.geometry import HeightField, Intrinsics, project_points, world_points
from litlab.datamodules.uav.sensors import Events


def event_frames(
    events: Events, t_a: torch.Tensor, t_b: torch.Tensor, height: int, width: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Polarity sums and event counts ``(B, 1, H, W)`` of the events in each window ``[t_a, t_b) (B,)``."""
    lo = torch.searchsorted(events.t, t_a.to(events.t.dtype))
    hi = torch.searchsorted(events.t, t_b.to(events.t.dtype))
    count = (hi - lo).clamp_min(0)
    window = torch.repeat_interleave(torch.arange(len(t_a), device=events.t.device), count)
    start = torch.cumsum(count, 0) - count
    index = torch.repeat_interleave(lo - start, count) + torch.arange(
        int(count.sum()), device=events.t.device
    )
    flat = window * height * width + events.y[index] * width + events.x[index]
    polarity = torch.zeros(len(t_a) * height * width, device=events.t.device)
    polarity.index_add_(0, flat, events.p[index].float())
    counts = torch.bincount(flat, minlength=len(t_a) * height * width).float()
    return polarity.reshape(-1, 1, height, width), counts.reshape(-1, 1, height, width)


def overlap_mask(
    event_intrinsics: Intrinsics,
    event_rotation: torch.Tensor,
    event_centre: torch.Tensor,
    rgb_intrinsics: Intrinsics,
    rgb_rotation: torch.Tensor,
    rgb_centre: torch.Tensor,
    surface: HeightField,
) -> torch.Tensor:
    """Ω ``(B, 1, He, We)``: event pixels whose surface point (LiDAR depth) falls inside the RGB image.

    Poses are ``(B, 3, 3), (B, 3)`` for both cameras at the same instants.
    """
    points = world_points(event_intrinsics, event_rotation, event_centre, surface)  # (B, P, 3)
    uv, depth = project_points(rgb_intrinsics, rgb_rotation, rgb_centre, points)
    inside = (
        (depth > 0)
        & (uv[..., 0] >= -0.5)
        & (uv[..., 0] <= rgb_intrinsics.width - 0.5)
        & (uv[..., 1] >= -0.5)
        & (uv[..., 1] <= rgb_intrinsics.height - 0.5)
    )
    return inside.reshape(-1, 1, event_intrinsics.height, event_intrinsics.width)


def blur_aware_rgb_loss(sub_renders: torch.Tensor, frames: torch.Tensor) -> torch.Tensor:
    """MSE of the exposure mean of sharp renders ``(B, S, 3, H, W)`` against captured ``frames (B, 3, H, W)``.

    Averaging renders at poses across the exposure models motion blur, so blurred frames stay usable.
    """
    return F.mse_loss(sub_renders.mean(dim=1), frames)


def whole_frame_event_loss(delta_log: torch.Tensor, polarity: torch.Tensor, threshold: float) -> torch.Tensor:
    """EventNeRF's loss: mean over all event pixels of ``(ΔL̂ − C·Σp)²``; ``(B, 1, H, W)`` inputs."""
    return F.mse_loss(delta_log, threshold * polarity)


def region_event_loss(
    delta_log: torch.Tensor,
    polarity: torch.Tensor,
    counts: torch.Tensor,
    mask: torch.Tensor,
    patch: int = 8,
    min_events: int = 8,
    eps: float = 1e-2,
    norm: str = "l1",
) -> torch.Tensor:
    """RER (reconstructed): ``mean_j ‖ΔL̂_j/‖ΔL̂_j‖ − E_j/‖E_j‖‖`` over ``patch``² regions j of Ω with at
    least ``min_events`` events, ``norm`` ``l1`` (the paper note's) or ``l2`` (squared: 2 − 2·cosine,
    whose gradient vanishes at agreement). Normalising per region absorbs an unknown, drifting threshold.

    ``delta_log``, ``polarity``, ``counts``, ``mask``: ``(B, 1, H, W)``, cropped to multiples of ``patch``.
    """

    def regions(x: torch.Tensor) -> torch.Tensor:  # (B, 1, H, W) -> (B * regions, patch²)
        h, w = x.shape[-2] // patch * patch, x.shape[-1] // patch * patch
        return (
            F.unfold(x[..., :h, :w], kernel_size=patch, stride=patch)
            .transpose(1, 2)
            .reshape(-1, patch * patch)
        )

    m = regions(mask.float())
    rendered, observed = regions(delta_log) * m, regions(polarity) * m
    keep = (regions(counts) * m).sum(-1) >= min_events
    if not keep.any():
        return delta_log.sum() * 0.0
    rendered, observed = rendered[keep], observed[keep]
    rendered = rendered / (rendered.norm(dim=-1, keepdim=True) + eps)
    observed = observed / (observed.norm(dim=-1, keepdim=True) + eps)
    if norm == "l2":
        return (rendered - observed).pow(2).sum(-1).mean()
    return (rendered - observed).abs().sum(-1).mean()
