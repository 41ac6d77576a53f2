"""The best a texture on the LiDAR DEM can do: a closed-form least-squares fit to the training views.

Every pixel's ray is marched to its first hit on the DEM (exact for any slope, unlike the texture
renderer's fixed-point cast), and the texture that minimises the squared error on the training views is,
texel by texel (nearest texel of ``cell`` m), the mean colour of the training pixels that land in it. Its
held-out error is the floor of a nearest-texel texture of that resolution (a bilinear texture can beat it
on smooth albedo); where views see different colours at one DEM point, no texture fits them all.
"""

from __future__ import annotations

import torch
from torch import Tensor

from litlab.datamodules.events import UAVSequence
from litlab.datamodules.uav.geometry import HeightField, Intrinsics
from litlab.datamodules.uav.structure import march


def dem_hits(
    intrinsics: Intrinsics, rotation: Tensor, centre: Tensor, dem: HeightField, step: float = 0.25
) -> Tensor:
    """DEM points ``(B, H·W, 3)`` seen through the pixel centres of cameras ``(B, 3, 3), (B, 3)``."""
    dirs = intrinsics.pixel_directions().reshape(-1, 3) @ rotation.transpose(-1, -2)  # (B, P, 3)
    origins = centre[:, None, :].expand_as(dirs)
    return origins + march(dem, origins, dirs, step)[..., None] * dirs


def dem_texture_floor(
    views: Tensor,
    intrinsics: Intrinsics,
    rotation: Tensor,
    centre: Tensor,
    dem: HeightField,
    train: Tensor,
    test: Tensor,
    cell: float = 0.5,
) -> dict[str, float]:
    """Held-out PSNR (mean of per-view PSNR, dB) of the least-squares DEM texture fitted on the ``train``
    views of ``views (K, 3, H, W)`` posed at ``(K, 3, 3), (K, 3)``, and the fraction of held-out pixels
    whose texel no training view saw (left out of the score)."""
    x0, _, y0, _ = dem.bounds

    def texels(index: Tensor) -> tuple[Tensor, Tensor]:
        xy = dem_hits(intrinsics, rotation[index], centre[index], dem)[..., :2]
        cells = ((xy - xy.new_tensor([x0, y0])) / cell).floor().long()
        ids = cells[..., 0] * 1_000_003 + cells[..., 1]
        return ids, views[index].flatten(2).transpose(1, 2)  # (B, P), (B, P, 3)

    train_ids, train_colours = texels(train)
    test_ids, test_colours = texels(test)
    keys, inverse = torch.unique(
        torch.cat([train_ids.reshape(-1), test_ids.reshape(-1)]), return_inverse=True
    )
    n_train = train_ids.numel()
    sums = torch.zeros(len(keys), 3).index_add_(0, inverse[:n_train], train_colours.reshape(-1, 3))
    counts = torch.zeros(len(keys)).index_add_(0, inverse[:n_train], torch.ones(n_train))
    slot = inverse[n_train:].reshape(test_ids.shape)
    seen = counts[slot] > 0
    fitted = sums[slot] / counts[slot].clamp_min(1)[..., None]
    squared = ((fitted - test_colours) ** 2).mean(-1)
    mse = (squared * seen).sum(1) / seen.sum(1).clamp_min(1)
    return {"psnr": float((-10 * torch.log10(mse)).mean()), "unseen": float(1 - seen.float().mean())}


def sequence_floor(sequence: UAVSequence, train: Tensor, test: Tensor, cell: float = 0.5) -> dict[str, float]:
    """``dem_texture_floor`` of a synthetic flight's sharp views on its LiDAR DEM."""
    rotation, centre = sequence.rgb_pose(sequence.frame_times)
    return dem_texture_floor(
        sequence.sharp_views, sequence.rgb_intrinsics, rotation, centre, sequence.surface, train, test, cell
    )
