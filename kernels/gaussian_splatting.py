"""3D Gaussian splatting (Kerbl et al., 2023) in pure torch: projection, spherical-harmonic colour and
front-to-back alpha compositing over each pixel's hits, differentiable by autograd, so it trains on a CPU.

Conventions (those of ``litlab.datamodules.uav.geometry``, and of the 3DGS / gsplat rasterisers):
cameras follow OpenCV (x right, y down, z forward), a pose is the camera-to-world rotation ``R (3, 3)``
and the centre ``c (3,)``; pixel centres sit at integer coordinates. A Gaussian has a mean, a unit
quaternion (w, x, y, z), log-scales, an opacity logit and SH coefficients ``(K, 3)`` with
``K = (degree + 1)²``; its colour is ``max(SH(d) + 0.5, 0)`` for the viewing direction ``d``.

Compositing follows the reference CUDA rasteriser: the image-plane covariance gets ``blur = 0.3`` px²
(its low-pass filter), ``α = min(0.99, o·exp(-½ δᵀΣ⁻¹δ))``, an ``α < 1/255`` is skipped, and a pixel stops
before the Gaussian that would take its transmittance below ``1e-4``. ``rasterize_dense`` composites every
Gaussian at every pixel and is the reference for ``rasterize``, which visits only the (pixel, Gaussian)
pairs with ``α ≥ 1/255``.
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


def gsplat_view(camera: Camera) -> tuple[Tensor, Tensor]:
    """``camera`` in gsplat's terms: world-to-camera ``viewmat (4, 4)`` and intrinsics ``K (3, 3)``, whose
    principal point is ours + 0.5 (gsplat puts pixel centres at half-integers, we at integers)."""
    rotation, centre = camera.rotation, camera.centre
    viewmat = torch.eye(4, device=centre.device, dtype=centre.dtype)
    viewmat[:3, :3] = rotation.T
    viewmat[:3, 3] = -rotation.T @ centre
    intrinsics = [[camera.fx, 0.0, camera.cx + 0.5], [0.0, camera.fy, camera.cy + 0.5], [0.0, 0.0, 1.0]]
    return viewmat, torch.tensor(intrinsics, device=centre.device, dtype=centre.dtype)


def _components(tensor: Tensor, dims: int = 1) -> Tensor:
    """The last ``dims`` axes moved to the front, contiguous: per-component rows, so the arithmetic below
    runs on contiguous ``(N,)`` rows (broadcasts over small trailing axes are slow on a CPU)."""
    return tensor.movedim(tuple(range(-dims, 0)), tuple(range(dims))).contiguous()


def _rotation_entries(quaternions: Tensor) -> list[list[Tensor]]:
    """The rotation matrix of quaternions ``(…, 4)`` (w, x, y, z), normalised first, as 3 × 3 rows ``(…)``."""
    w, x, y, z = _components(torch.nn.functional.normalize(quaternions, dim=-1))
    return [
        [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
        [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
        [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
    ]


def _matrix(entries: list[list[Tensor]]) -> Tensor:
    """``(…, 3, 3)`` from 3 × 3 rows ``(…)`` (a view of one ``(9, …)`` block)."""
    return torch.stack([e for row in entries for e in row]).movedim(0, -1).unflatten(-1, (3, 3))


def quaternion_to_matrix(quaternions: Tensor) -> Tensor:
    """Rotation matrices ``(…, 3, 3)`` of quaternions ``(…, 4)`` (w, x, y, z), normalised first."""
    return _matrix(_rotation_entries(quaternions))


def covariance_3d(quaternions: Tensor, log_scales: Tensor) -> Tensor:
    """World covariances ``(N, 3, 3) = R S Sᵀ Rᵀ`` from quaternions ``(N, 4)`` and log-scales ``(N, 3)``."""
    scales = _components(log_scales.exp())
    m = [[r * s for r, s in zip(row, scales, strict=True)] for row in _rotation_entries(quaternions)]
    return _matrix([[sum(p * q for p, q in zip(mi, mj, strict=True)) for mj in m] for mi in m])


def sh_colour(sh: Tensor, directions: Tensor) -> Tensor:
    """``max(SH(d) + 0.5, 0)`` ``(N, 3)`` for coefficients ``sh (N, K, 3)``, K ∈ {1, 4, 9, 16}, and unit
    viewing directions ``(N, 3)`` (camera to Gaussian), with the real SH basis and signs of 3DGS."""
    degree = math.isqrt(sh.shape[-2]) - 1
    if (degree + 1) ** 2 != sh.shape[-2] or degree > 3:
        raise ValueError(f"sh must have 1, 4, 9 or 16 coefficients per channel, got {sh.shape[-2]}")
    x, y, z = _components(directions)
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
    coefficients = _components(sh, 2)  # (K, 3, …)
    return (sum(b * k for b, k in zip(basis, coefficients, strict=True)) + 0.5).clamp_min(0.0).movedim(0, -1)


def project(
    means: Tensor, covariances: Tensor, camera: Camera, blur: float = 0.3, near: float = 0.01
) -> Projected:
    """EWA splatting: the pinhole projection of the means and the first-order (Jacobian) projection of the
    covariances, ``Σ' = J W Σ Wᵀ Jᵀ + blur·I``; Gaussians nearer than ``near`` are not visible."""
    x, y, z = _components((means - camera.centre) @ camera.rotation)  # camera frame (R: camera-to-world)
    visible = z > near
    z = torch.where(visible, z, torch.ones_like(z))
    pixels = torch.stack([camera.fx * x / z + camera.cx, camera.fy * y / z + camera.cy], -1)
    # the reference linearises at the mean clamped to 1.3× the half field of view, so Gaussians far
    # outside the frustum (beside an oblique camera, at small depth) do not splat across the whole image
    lim_x, lim_y = 1.3 * 0.5 * camera.width / camera.fx, 1.3 * 0.5 * camera.height / camera.fy
    tx, ty = (x / z).clamp(-lim_x, lim_x), (y / z).clamp(-lim_y, lim_y)
    # the rows of J Rᵀ (J: the (2, 3) Jacobian at the clamped mean), then J Rᵀ Σ R Jᵀ, on component rows
    axes = camera.rotation.T  # the camera's x, y, z axes in the world
    t0 = [camera.fx / z * (axes[0, k] - tx * axes[2, k]) for k in range(3)]
    t1 = [camera.fy / z * (axes[1, k] - ty * axes[2, k]) for k in range(3)]
    cov = [row.unbind(0) for row in _components(covariances, 2).unbind(0)]

    def form(u: list[Tensor], v: list[Tensor]) -> Tensor:
        return sum(u[i] * sum(cov[i][j] * v[j] for j in range(3)) for i in range(3))

    a, b, c = form(t0, t0) + blur, form(t0, t1), form(t1, t1) + blur
    det = (a * c - b * b).clamp_min(1e-12)
    conics = torch.stack([c / det, -b / det, a / det], -1)
    largest = (0.5 * (a + c) + (0.25 * (a - c) ** 2 + b * b).sqrt()).detach()
    return Projected(pixels, conics, torch.where(visible, z, torch.zeros_like(z)), largest, visible)


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


BOX_SIZES = (2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256)
BOX_ELEMENTS = 1 << 22  # pixels evaluated at once: bounds the memory of the footprint search


def _boxes(
    means: Tensor, conics: Tensor, opacities: Tensor, width: int, height: int
) -> tuple[Tensor, Tensor, Tensor]:
    """Per Gaussian, the level ``2·ln(255·o)`` (+1e-4) of its ``α ≥ 1/255`` ellipse ``δᵀΣ⁻¹δ ≤ level``, and
    the first pixel (x, y) and size of the ellipse's bounding box clipped to the image (size ≤ 0: off it)."""
    level = 2 * (opacities.log() - math.log(ALPHA_MIN)).clamp_min(0) + 1e-4
    a, b, c = conics.unbind(-1)
    det = (a * c - b * b).clamp_min(1e-30)
    half = torch.stack([(level * c / det).sqrt(), (level * a / det).sqrt()], -1)  # the ellipse's x/y reach
    limit = means.new_tensor([width, height])
    lo = (means - half).ceil().clamp_min(0)
    return level, lo, torch.minimum((means + half).floor(), limit - 1) - lo + 1


def _footprints(
    means: Tensor, conics: Tensor, level: Tensor, lo: Tensor, extent: Tensor, width: int, height: int
) -> Tensor:
    """Every (pixel, Gaussian) pair with ``α ≥ 1/255`` (or within 1e-4 of it in ``δᵀΣ⁻¹δ``), for Gaussians
    sorted near to far with their ``_boxes``; no autograd. Each Gaussian is evaluated over a square box of
    ``BOX_SIZES`` pixels that holds its bounding box (Gaussians bucketed by box size, boxes moved inside the
    image). Returns the pairs as sorted keys ``(y, x, rank)`` packed in bits (``_unpack``), so one integer
    sort orders them by pixel, then depth."""
    x_bits, rank_bits = max(width - 1, 1).bit_length(), max(len(means) - 1, 1).bit_length()
    key_type = torch.int32 if max(height - 1, 1).bit_length() + x_bits + rank_bits < 31 else torch.int64
    device, limit = means.device, means.new_tensor([width, height])
    sizes = means.new_tensor([*(s for s in BOX_SIZES if s < max(width, height)), max(width, height)])
    bucket = torch.bucketize(extent.amax(-1), sizes)
    counts = torch.bincount(bucket, minlength=len(sizes)).tolist()
    by_bucket = torch.argsort(bucket)
    keys = []
    start = 0
    for size, count in zip(sizes.long().tolist(), counts, strict=True):
        box_x, box_y = min(size, width), min(size, height)
        chunk = max(1, BOX_ELEMENTS // (size * size))
        for first in range(start, start + count, chunk):
            # Gaussians on the last (contiguous) axis: (box y, box x, n), so every broadcast is a fast one
            rank = by_bucket[first : min(first + chunk, start + count)]
            corner = torch.minimum(lo.index_select(0, rank), limit - limit.new_tensor([box_x, box_y]))
            corner_x, corner_y = _components(corner)
            offset_x, offset_y = _components(corner - means.index_select(0, rank))
            dx = torch.arange(box_x, dtype=means.dtype, device=device)[:, None] + offset_x  # (box x, n)
            dy = torch.arange(box_y, dtype=means.dtype, device=device)[:, None] + offset_y  # (box y, n)
            ca, cb, cc = _components(conics.index_select(0, rank))
            # δᵀΣ⁻¹δ − level = a·dx² + 2b·dx·dy + c·dy² − level ≤ 0
            row = level.index_select(0, rank) - cc * dy * dy  # (box y, n)
            cross = torch.addcmul(ca * dx * dx, 2 * cb * dy[:, None], dx)  # (box y, box x, n)
            corner_x, corner_y = corner_x.to(key_type), corner_y.to(key_type)
            base = (corner_y << (x_bits + rank_bits)) | (corner_x << rank_bits) | rank.to(key_type)
            pixel_y, pixel_x = (torch.arange(n, dtype=key_type, device=device) for n in (box_y, box_x))
            pixel_bits = (pixel_y[:, None] << x_bits) + pixel_x
            keys.append(
                torch.masked_select((pixel_bits << rank_bits)[:, :, None] + base, cross <= row[:, None])
            )
        start += count
    key = torch.cat(keys) if keys else torch.zeros(0, dtype=key_type, device=device)
    return torch.sort(key).values


def _unpack(key: Tensor, width: int, n: int) -> tuple[Tensor, Tensor, Tensor]:
    """Pixel y, x and Gaussian rank (int64) of ``_footprints``' keys."""
    x_bits, rank_bits = max(width - 1, 1).bit_length(), max(n - 1, 1).bit_length()
    key = key.long()
    return key >> (x_bits + rank_bits), (key >> rank_bits) & ((1 << x_bits) - 1), key & ((1 << rank_bits) - 1)


def rasterize(
    projected: Projected,
    opacities: Tensor,
    colours: Tensor,
    width: int,
    height: int,
    background: Tensor | None = None,
) -> tuple[Tensor, Tensor, Tensor]:
    """Compositing over compacted hits: ``_footprints`` lists each pixel's (pixel, Gaussian) pairs with
    ``α ≥ 1/255`` near to far, α is recomputed with autograd for those pairs only, transmittance is a
    per-pixel prefix sum of ``log(1 − α)`` (one float64 cumsum over all pairs, less each pixel's start),
    and colour, depth and opacity are one segment sum per pixel. Equals ``rasterize_dense``."""
    dtype = colours.dtype
    background = colours.new_zeros(3) if background is None else background
    with torch.no_grad():
        level, lo, extent = _boxes(projected.means, projected.conics, opacities, width, height)
        drawn = projected.visible & (opacities >= ALPHA_MIN) & (extent > 0).all(-1)
        order = drawn.nonzero()[:, 0]  # drawn Gaussians with pixels in the image, then near to far
        order = order.index_select(0, torch.argsort(projected.depths.index_select(0, order), stable=True))
        key = _footprints(
            projected.means.index_select(0, order),
            projected.conics.index_select(0, order),
            level.index_select(0, order),
            lo.index_select(0, order),
            extent.index_select(0, order),
            width,
            height,
        )
        y, x, rank = _unpack(key, width, len(order))
        gaussian = order.index_select(0, rank)
        pixel = y * width + x
        counts = torch.bincount(pixel, minlength=width * height)
    # each per-Gaussian quantity gathered as its own contiguous row (1-D gathers scatter back fast)
    rows = [*_components(projected.means), *_components(projected.conics), opacities]
    mx, my, a, b, c, o, red, green, blue, depth = (
        row.index_select(0, gaussian) for row in [*rows, *_components(colours), projected.depths]
    )
    dx, dy = x.to(mx.dtype) - mx, y.to(mx.dtype) - my
    alpha = o * (dx * (-0.5 * a * dx - b * dy) - 0.5 * c * dy * dy).clamp_max(0.0).exp()
    alpha = torch.where(alpha < ALPHA_MIN, 0.0, alpha.clamp_max(ALPHA_MAX))  # the search's margin
    log_keep = torch.log1p(-alpha)
    # log T after each pair, less its pixel's start: the cumsum before the pixel's first pair (with autograd,
    # so the earlier pixels' terms cancel in the gradient too)
    after = torch.cumsum(log_keep.double(), 0)
    before = torch.cat([after.new_zeros(1), after])
    start = before.index_select(0, counts.cumsum(0) - counts).index_select(0, pixel)
    # a pixel stops before the Gaussian that would take its transmittance below 1e-4
    kept = (after.detach() - start) >= math.log(TRANSMITTANCE_MIN)
    weights = torch.where(kept, alpha * (before[:-1] - start).to(dtype).exp(), 0.0)  # α·T before it
    rgb, depth, opacity = (
        torch.stack([torch.segment_reduce(v, "sum", lengths=counts, unsafe=True) for v in values])
        for values in ([red * weights, green * weights, blue * weights], [depth * weights], [weights])
    )  # per pixel: a sum over its pairs
    rgb = rgb + (1 - opacity) * background[:, None]
    return rgb.reshape(3, height, width), depth.reshape(1, height, width), opacity.reshape(1, height, width)


def render(
    means: Tensor,
    quaternions: Tensor,
    log_scales: Tensor,
    opacity_logits: Tensor,
    sh: Tensor,
    camera: Camera,
    background: Tensor | None = None,
) -> tuple[Tensor, Tensor, Tensor]:
    """One view of a Gaussian scene: rgb ``(3, H, W)``, expected depth and opacity ``(1, H, W)``."""
    projected = project(means, covariance_3d(quaternions, log_scales), camera)
    directions = torch.nn.functional.normalize(means - camera.centre, dim=-1)
    colours = sh_colour(sh, directions)
    return rasterize(
        projected, torch.sigmoid(opacity_logits), colours, camera.width, camera.height, background
    )


def render_with_gsplat(
    means: Tensor,
    quaternions: Tensor,
    log_scales: Tensor,
    opacity_logits: Tensor,
    sh: Tensor,
    camera: Camera,
    background: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """The same view through ``gsplat.rasterization`` (the `splat` extra; CUDA only): rgb ``(3, H, W)`` and
    opacity ``(1, H, W)``, to check and time this module against the rasteriser 3DGS users train with."""
    import gsplat

    viewmat, intrinsics = gsplat_view(camera)
    colours, alphas, _ = gsplat.rasterization(
        means,
        quaternions,
        log_scales.exp(),
        torch.sigmoid(opacity_logits),
        sh,
        viewmat[None],
        intrinsics[None],
        camera.width,
        camera.height,
        sh_degree=math.isqrt(sh.shape[-2]) - 1,
        backgrounds=None if background is None else background[None],
    )
    return colours[0].permute(2, 0, 1), alphas[0].permute(2, 0, 1)
