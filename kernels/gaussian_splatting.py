"""3D Gaussian splatting (Kerbl et al., 2023) in pure torch: projection, spherical-harmonic colour and
tile-based front-to-back alpha compositing, differentiable by autograd, so it trains on a CPU.

Conventions (those of ``litlab.datamodules.uav.geometry``, and of the 3DGS / gsplat rasterisers):
cameras follow OpenCV (x right, y down, z forward), a pose is the camera-to-world rotation ``R (3, 3)``
and the centre ``c (3,)``; pixel centres sit at integer coordinates. A Gaussian has a mean, a unit
quaternion (w, x, y, z), log-scales, an opacity logit and SH coefficients ``(K, 3)`` with
``K = (degree + 1)²``; its colour is ``max(SH(d) + 0.5, 0)`` for the viewing direction ``d``.

Compositing follows the reference CUDA rasteriser: the image-plane covariance gets ``blur = 0.3`` px²
(its low-pass filter), ``α = min(0.99, o·exp(-½ δᵀΣ⁻¹δ))``, an ``α < 1/255`` is skipped, and a pixel stops
before the Gaussian that would take its transmittance below ``1e-4``. ``rasterize_dense`` composites every
Gaussian at every pixel and is the reference for the tiled ``rasterize``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

SH_C0 = 0.28209479177387814
SH_C1 = 0.4886025119029199
SH_C2 = (
    1.0925484305920792,
    -1.0925484305920792,
    0.31539156525252005,
    -1.0925484305920792,
    0.5462742152960396,
)
SH_C3 = (
    -0.5900435899266435,
    2.890611442640554,
    -0.4570457994644658,
    0.3731763325901154,
    -0.4570457994644658,
    1.445305721320277,
    -0.5900435899266435,
)
ALPHA_MIN = 1.0 / 255.0
ALPHA_MAX = 0.99
TRANSMITTANCE_MIN = 1e-4


@dataclass(frozen=True)
class Camera:
    """A posed pinhole camera: camera-to-world ``rotation (3, 3)``, ``centre (3,)``, intrinsics in pixels."""

    rotation: Tensor
    centre: Tensor
    fx: float
    fy: float
    cx: float
    cy: float
    width: int
    height: int


@dataclass(frozen=True)
class Projected:
    """Gaussians in the image: pixel means ``(N, 2)``, conics (inverse covariances, ``(N, 3)`` as a, b, c of
    ``[[a, b], [b, c]]``), depths ``(N,)``, the largest eigenvalue of each covariance ``(N,)`` (px²), and
    which lie in front of the camera."""

    means: Tensor
    conics: Tensor
    depths: Tensor
    largest_variance: Tensor
    visible: Tensor


def quaternion_to_matrix(quaternions: Tensor) -> Tensor:
    """Rotation matrices ``(…, 3, 3)`` of quaternions ``(…, 4)`` (w, x, y, z), normalised first."""
    w, x, y, z = torch.nn.functional.normalize(quaternions, dim=-1).unbind(-1)
    rows = (
        (1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)),
        (2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)),
        (2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)),
    )
    return torch.stack([torch.stack(row, -1) for row in rows], -2)


def covariance_3d(quaternions: Tensor, log_scales: Tensor) -> Tensor:
    """World covariances ``(N, 3, 3) = R S Sᵀ Rᵀ`` from quaternions ``(N, 4)`` and log-scales ``(N, 3)``."""
    m = quaternion_to_matrix(quaternions) * log_scales.exp()[..., None, :]
    return m @ m.transpose(-1, -2)


def sh_colour(sh: Tensor, directions: Tensor) -> Tensor:
    """``max(SH(d) + 0.5, 0)`` ``(N, 3)`` for coefficients ``sh (N, K, 3)``, K ∈ {1, 4, 9, 16}, and unit
    viewing directions ``(N, 3)`` (camera to Gaussian), with the real SH basis and signs of 3DGS."""
    degree = math.isqrt(sh.shape[-2]) - 1
    if (degree + 1) ** 2 != sh.shape[-2] or degree > 3:
        raise ValueError(f"sh must have 1, 4, 9 or 16 coefficients per channel, got {sh.shape[-2]}")
    x, y, z = (directions[..., i : i + 1] for i in range(3))
    basis = [torch.full_like(x, SH_C0)]
    if degree >= 1:
        basis += [-SH_C1 * y, SH_C1 * z, -SH_C1 * x]
    if degree >= 2:
        xx, yy, zz, xy, yz, xz = x * x, y * y, z * z, x * y, y * z, x * z
        basis += [
            SH_C2[0] * xy,
            SH_C2[1] * yz,
            SH_C2[2] * (2 * zz - xx - yy),
            SH_C2[3] * xz,
            SH_C2[4] * (xx - yy),
        ]
    if degree >= 3:
        basis += [
            SH_C3[0] * y * (3 * xx - yy),
            SH_C3[1] * xy * z,
            SH_C3[2] * y * (4 * zz - xx - yy),
            SH_C3[3] * z * (2 * zz - 3 * xx - 3 * yy),
            SH_C3[4] * x * (4 * zz - xx - yy),
            SH_C3[5] * z * (xx - yy),
            SH_C3[6] * x * (xx - 3 * yy),
        ]
    return ((torch.cat(basis, -1)[..., None] * sh).sum(-2) + 0.5).clamp_min(0.0)


def project(
    means: Tensor, covariances: Tensor, camera: Camera, blur: float = 0.3, near: float = 0.01
) -> Projected:
    """EWA splatting: the pinhole projection of the means and the first-order (Jacobian) projection of the
    covariances, ``Σ' = J W Σ Wᵀ Jᵀ + blur·I``; Gaussians nearer than ``near`` are not visible."""
    cam = (means - camera.centre) @ camera.rotation  # world -> camera frame (R is camera-to-world)
    x, y, z = cam.unbind(-1)
    visible = z > near
    z = torch.where(visible, z, torch.ones_like(z))
    pixels = torch.stack([camera.fx * x / z + camera.cx, camera.fy * y / z + camera.cy], -1)
    zero = torch.zeros_like(z)
    # the reference linearises at the mean clamped to 1.3× the half field of view, so Gaussians far
    # outside the frustum (beside an oblique camera, at small depth) do not splat across the whole image
    lim_x, lim_y = 1.3 * 0.5 * camera.width / camera.fx, 1.3 * 0.5 * camera.height / camera.fy
    tx, ty = (x / z).clamp(-lim_x, lim_x), (y / z).clamp(-lim_y, lim_y)
    jacobian = torch.stack(
        [
            torch.stack([camera.fx / z, zero, -camera.fx * tx / z], -1),
            torch.stack([zero, camera.fy / z, -camera.fy * ty / z], -1),
        ],
        -2,
    )  # (N, 2, 3)
    t = jacobian @ camera.rotation.transpose(-1, -2)
    cov = t @ covariances @ t.transpose(-1, -2)
    a, b, c = cov[:, 0, 0] + blur, cov[:, 0, 1], cov[:, 1, 1] + blur
    det = (a * c - b * b).clamp_min(1e-12)
    conics = torch.stack([c / det, -b / det, a / det], -1)
    largest = (0.5 * (a + c) + (0.25 * (a - c) ** 2 + b * b).sqrt()).detach()
    return Projected(pixels, conics, torch.where(visible, z, zero), largest, visible)


def _composite(alpha: Tensor, colours: Tensor, depths: Tensor, background: Tensor) -> tuple[Tensor, ...]:
    """Front-to-back compositing along the last axis of ``alpha (…, P, K)`` (sorted near to far) with the
    reference rules, for colours ``(…, K, 3)`` and depths ``(…, K)``; returns colour ``(…, P, 3)``,
    expected depth ``(…, P)`` and opacity ``(…, P)``."""
    alpha = torch.where(alpha < ALPHA_MIN, 0.0, alpha.clamp_max(ALPHA_MAX))
    log_after = torch.cumsum(torch.log1p(-alpha), -1)
    # a pixel stops before the Gaussian that would take its transmittance below 1e-4
    kept = log_after >= math.log(TRANSMITTANCE_MIN)
    weights = torch.where(kept, alpha * (log_after.exp() / (1 - alpha)), 0.0)  # α·T before it
    opacity = weights.sum(-1)
    rgb = weights @ colours + (1 - opacity)[..., None] * background
    return rgb, (weights @ depths[..., None])[..., 0], opacity


def _gaussian_alpha(pixels: Tensor, means: Tensor, conics: Tensor, opacities: Tensor) -> Tensor:
    """``o·exp(-½ δᵀΣ⁻¹δ)`` for pixels ``(…, P, 2)`` against Gaussians ``(…, K, ·)``: ``(…, P, K)``."""
    dx = pixels[..., :, None, 0] - means[..., None, :, 0]
    dy = pixels[..., :, None, 1] - means[..., None, :, 1]
    a, b, c = (conics[..., None, :, i] for i in range(3))
    power = dx * (-0.5 * a * dx - b * dy) - 0.5 * c * dy * dy
    return opacities[..., None, :] * power.clamp_max(0.0).exp()


def _pixel_grid(width: int, height: int, device: torch.device, dtype: torch.dtype) -> Tensor:
    v, u = torch.meshgrid(
        torch.arange(height, device=device, dtype=dtype),
        torch.arange(width, device=device, dtype=dtype),
        indexing="ij",
    )
    return torch.stack([u, v], -1)


def rasterize_dense(
    projected: Projected,
    opacities: Tensor,
    colours: Tensor,
    width: int,
    height: int,
    background: Tensor | None = None,
) -> tuple[Tensor, Tensor, Tensor]:
    """Every Gaussian at every pixel, sorted by depth: the reference. Returns rgb ``(3, H, W)``, expected
    depth ``(1, H, W)`` and opacity ``(1, H, W)``. Memory ``H·W·N``: for tests and tiny scenes."""
    background = colours.new_zeros(3) if background is None else background
    order = torch.argsort(torch.where(projected.visible, projected.depths, math.inf), stable=True)
    order = order[projected.visible[order]]
    pixels = _pixel_grid(width, height, colours.device, colours.dtype).reshape(-1, 2)
    alpha = _gaussian_alpha(pixels, projected.means[order], projected.conics[order], opacities[order])
    rgb, depth, opacity = _composite(alpha, colours[order], projected.depths[order], background)
    return (
        rgb.T.reshape(3, height, width),
        depth.reshape(1, height, width),
        opacity.reshape(1, height, width),
    )


def rasterize(
    projected: Projected,
    opacities: Tensor,
    colours: Tensor,
    width: int,
    height: int,
    background: Tensor | None = None,
    tile: int = 4,
) -> tuple[Tensor, Tensor, Tensor]:
    """Tile-based compositing: each Gaussian is listed in the ``tile``×``tile`` pixel tiles its box
    touches, lists are sorted by (tile, depth), α over a tile's pixels is one batched product, and each
    pixel composites only its own hits (α ≥ 1/255), padded to the longest. The box's half-width
    ``√(2·ln(255·o)·λ_max)`` bounds where ``α ≥ 1/255`` (the reference's 3σ box drops a little more), so
    it equals ``rasterize_dense``."""
    device, dtype = colours.device, colours.dtype
    background = colours.new_zeros(3) if background is None else background
    tiles_x, tiles_y = -(-width // tile), -(-height // tile)
    n_tiles = tiles_x * tiles_y
    means = projected.means.detach()
    reach = 2 * torch.log(255 * opacities.detach()).clamp_min(0) * projected.largest_variance
    radii = reach.sqrt().ceil()
    lo = ((means - radii[:, None]) / tile).floor().long()
    hi = ((means + radii[:, None]) / tile).floor().long()
    lo[:, 0].clamp_(0, tiles_x), lo[:, 1].clamp_(0, tiles_y)
    hi[:, 0].clamp_(-1, tiles_x - 1), hi[:, 1].clamp_(-1, tiles_y - 1)
    span = (hi - lo + 1).clamp_min(0)
    drawn = projected.visible & (opacities.detach() >= ALPHA_MIN)
    order = torch.argsort(projected.depths.detach(), stable=True)
    order = order[drawn[order]]  # drawn Gaussians, near to far
    counts = span[order, 0] * span[order, 1]
    # (Gaussian, tile) pairs in depth order: the k-th pair of a Gaussian covers tile lo + (k mod w, k div w)
    first = counts.cumsum(0) - counts
    pair_gaussian = torch.repeat_interleave(torch.arange(len(order), device=device), counts)
    k = torch.arange(len(pair_gaussian), device=device) - first[pair_gaussian]
    box_lo, box_w = lo[order][pair_gaussian], span[order, 0][pair_gaussian].clamp_min(1)
    tile_id = (box_lo[:, 1] + k // box_w) * tiles_x + box_lo[:, 0] + k % box_w
    tile_id, by_tile = torch.sort(tile_id, stable=True)  # stable: depth order within a tile
    per_tile = torch.bincount(tile_id, minlength=n_tiles)
    slot = torch.arange(len(tile_id), device=device) - (per_tile.cumsum(0) - per_tile)[tile_id]
    # per drawn Gaussian, its shape (mean, conic, log o: finite, as drawn ones have o ≥ 1/255) and its
    # look (colour, depth), each with a transparent last row (log o = -1e4) that pads shorter lists
    shape_rows = torch.cat([projected.means, projected.conics, opacities.log()[:, None]], -1)[order]
    shape_rows = torch.cat([shape_rows, shape_rows.new_tensor([[0, 0, 0, 0, 0, -1e4]])])
    look_rows = torch.cat([colours, projected.depths[:, None]], -1)[order]
    look_rows = torch.cat([look_rows, look_rows.new_zeros(1, 4)])
    lists = torch.full((n_tiles, max(int(per_tile.max()), 1)), len(order), device=device, dtype=torch.long)
    lists[tile_id, slot] = pair_gaussian[by_tile]
    rows = shape_rows[lists]  # (T, K, 6)
    # log α at a tile's pixel (x, y) (offsets from its first pixel) is a quadratic in x and y: its six
    # coefficients per (tile, Gaussian) pair, then one batched product with the pixels' monomials.
    # Offsets stay small, so float32 loses nothing to cancellation.
    origin = _pixel_grid(tiles_x, tiles_y, device, dtype).reshape(-1, 1, 2) * tile
    dx, dy = (origin - rows[..., 0:2]).unbind(-1)
    a, b, c, log_opacity = rows[..., 2], rows[..., 3], rows[..., 4], rows[..., 5]
    bx_cy = b * dx + c * dy
    coefficients = torch.stack(
        [
            -0.5 * a,
            -b,
            -0.5 * c,
            -(a * dx + b * dy),
            -bx_cy,
            log_opacity - 0.5 * a * dx * dx - 0.5 * dy * (bx_cy + b * dx),
        ],
        -1,
    )  # (T, K, 6)
    x, y = _pixel_grid(tile, tile, device, dtype).reshape(-1, 2).unbind(-1)
    monomials = torch.stack([x * x, x * y, y * y, x, y, torch.ones_like(x)], -1)  # (tile², 6)
    # the exponent is ≤ log o (the conic is positive definite); clamped as the reference clamps it
    alpha = (monomials @ coefficients.transpose(-1, -2)).clamp_max(0.0).exp()  # (T, tile², K)
    # most of a tile's list misses a given pixel (α < 1/255, skipped by the rules): each pixel keeps its
    # own hits, in depth order, padded to the longest, and only those are composited
    hits = alpha.detach() >= ALPHA_MIN
    pixel, entry = hits.reshape(-1, hits.shape[-1]).nonzero(as_tuple=True)
    per_pixel = hits.sum(-1).reshape(-1)
    column = torch.arange(len(pixel), device=device) - (per_pixel.cumsum(0) - per_pixel)[pixel]
    shape = (len(per_pixel), max(int(per_pixel.max()), 1))
    index = (pixel, column)
    hit_alpha = alpha.new_zeros(shape).index_put(index, alpha.reshape(-1, alpha.shape[-1])[pixel, entry])
    gaussian = lists.new_full(shape, len(order)).index_put(index, lists[pixel // tile**2, entry])
    looks = look_rows[gaussian]  # (tiles · tile², K', 4)
    rgb, depth, opacity = _composite(hit_alpha[:, None], looks[..., :3], looks[..., 3], background)
    shape = (n_tiles, tile * tile)
    rgb, depth, opacity = rgb.reshape(*shape, 3), depth.reshape(shape), opacity.reshape(shape)
    image = torch.cat([rgb, depth[..., None], opacity[..., None]], -1)  # (T, tile², 5)
    image = image.reshape(tiles_y, tiles_x, tile, tile, 5).permute(4, 0, 2, 1, 3)
    image = image.reshape(5, tiles_y * tile, tiles_x * tile)[:, :height, :width]
    return image[:3], image[3:4], image[4:5]


def render(
    means: Tensor,
    quaternions: Tensor,
    log_scales: Tensor,
    opacity_logits: Tensor,
    sh: Tensor,
    camera: Camera,
    background: Tensor | None = None,
    tile: int = 4,
) -> tuple[Tensor, Tensor, Tensor]:
    """One view of a Gaussian scene: rgb ``(3, H, W)``, expected depth and opacity ``(1, H, W)``."""
    projected = project(means, covariance_3d(quaternions, log_scales), camera)
    directions = torch.nn.functional.normalize(means - camera.centre, dim=-1)
    colours = sh_colour(sh, directions)
    return rasterize(
        projected, torch.sigmoid(opacity_logits), colours, camera.width, camera.height, background, tile
    )
