"""The pure-torch 3DGS renderer: projection against the UAV camera model, closed forms for one Gaussian,
occlusion order, SH colour, the rasteriser against the dense reference, and gradients."""

from __future__ import annotations

import math

import pytest
import torch

from litlab.datamodules.uav.geometry import Intrinsics, nadir_rotation, project_points
from litlab.kernels import gaussian_splatting
from litlab.kernels.gaussian_splatting import (
    SH_C0,
    SH_C1,
    Camera,
    covariance_3d,
    project,
    rasterize,
    rasterize_dense,
    render,
    sh_colour,
)


def _camera(width: int = 24, height: int = 16, dtype: torch.dtype = torch.float32) -> Camera:
    intrinsics = Intrinsics.from_fov(width, height, 60.0)
    return Camera(
        nadir_rotation(torch.tensor(0.3, dtype=dtype)),
        torch.tensor([0.2, -0.1, 10.0], dtype=dtype),
        intrinsics.fx,
        intrinsics.fy,
        intrinsics.cx,
        intrinsics.cy,
        width,
        height,
    )


def _scene(
    n: int, seed: int = 0, dtype: torch.dtype = torch.float32, degree: int = 1
) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return {
        "means": torch.cat([torch.rand(n, 2, generator=g) * 8 - 4, torch.rand(n, 1, generator=g) * 2], 1).to(
            dtype
        ),
        "quaternions": torch.randn(n, 4, generator=g).to(dtype),
        "log_scales": (torch.rand(n, 3, generator=g) * 1.5 - 1.5).to(dtype),
        "opacity_logits": torch.randn(n, generator=g).to(dtype),
        "sh": (torch.randn(n, (degree + 1) ** 2, 3, generator=g) * 0.3).to(dtype),
    }


def test_means_project_like_the_uav_camera_model() -> None:
    camera, scene = _camera(), _scene(50)
    projected = project(scene["means"], covariance_3d(scene["quaternions"], scene["log_scales"]), camera)
    intrinsics = Intrinsics(camera.fx, camera.fy, camera.cx, camera.cy, camera.width, camera.height)
    pixels, depths = project_points(intrinsics, camera.rotation, camera.centre, scene["means"])
    torch.testing.assert_close(projected.means, pixels)
    torch.testing.assert_close(projected.depths, depths)


def test_one_isotropic_gaussian_renders_its_closed_form() -> None:
    """A sphere of std σ at depth z on the optical axis: α(δ) = o·exp(-|δ|²/2s²), s² = (fσ/z)² + 0.3."""
    camera = _camera(33, 33)
    sigma, opacity, depth = 0.4, 0.8, 10.0
    mean = camera.centre + camera.rotation @ torch.tensor([0.0, 0.0, depth])
    rgb, rendered_depth, alpha = render(
        mean[None],
        torch.tensor([[1.0, 0.0, 0.0, 0.0]]),
        torch.full((1, 3), math.log(sigma)),
        torch.logit(torch.tensor([opacity])),
        torch.full((1, 1, 3), (0.7 - 0.5) / SH_C0),
        camera,
    )
    v, u = torch.meshgrid(torch.arange(33.0), torch.arange(33.0), indexing="ij")
    s2 = (camera.fx * sigma / depth) ** 2 + 0.3
    expected = opacity * torch.exp(-((u - camera.cx) ** 2 + (v - camera.cy) ** 2) / (2 * s2))
    expected = torch.where(expected < 1 / 255, torch.zeros_like(expected), expected)
    torch.testing.assert_close(alpha[0], expected, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(rgb, 0.7 * expected.expand(3, -1, -1), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(rendered_depth[0], depth * expected, atol=1e-4, rtol=1e-5)


def test_the_nearer_of_two_opaque_gaussians_hides_the_farther() -> None:
    camera = _camera(17, 17)
    axis = camera.rotation[:, 2]
    means = torch.stack([camera.centre + 8 * axis, camera.centre + 5 * axis])  # far one listed first
    colours = torch.tensor([[[(0.1 - 0.5) / SH_C0] * 3], [[(0.9 - 0.5) / SH_C0] * 3]])
    rgb, _, alpha = render(
        means,
        torch.tensor([[1.0, 0, 0, 0]] * 2),
        torch.zeros(2, 3),
        torch.tensor([0.0, 8.0]),
        colours,
        camera,
    )
    centre = rgb[:, 8, 8]
    # near: α = 0.99 (clamped); the far one (o = 0.5) shows through what is left
    torch.testing.assert_close(centre, torch.full((3,), 0.99 * 0.9 + 0.01 * 0.5 * 0.1), atol=1e-4, rtol=0)
    torch.testing.assert_close(alpha[0, 8, 8], torch.tensor(0.99 + 0.01 * 0.5), atol=1e-4, rtol=0)


def test_sh_colour_matches_the_degree_one_formula() -> None:
    sh = torch.randn(5, 4, 3) * 0.2
    d = torch.nn.functional.normalize(torch.randn(5, 3), dim=-1)
    x, y, z = d[:, :1], d[:, 1:2], d[:, 2:3]
    expected = SH_C0 * sh[:, 0] - SH_C1 * y * sh[:, 1] + SH_C1 * z * sh[:, 2] - SH_C1 * x * sh[:, 3] + 0.5
    torch.testing.assert_close(sh_colour(sh, d), expected.clamp_min(0))


def test_sh_of_higher_degree_ignores_zero_coefficients_and_rejects_bad_shapes() -> None:
    d = torch.nn.functional.normalize(torch.randn(4, 3), dim=-1)
    low = torch.randn(4, 4, 3) * 0.2
    high = torch.cat([low, torch.zeros(4, 12, 3)], 1)
    torch.testing.assert_close(sh_colour(high, d), sh_colour(low, d))
    with pytest.raises(ValueError, match="1, 4, 9 or 16"):
        sh_colour(torch.zeros(4, 5, 3), d)


@pytest.mark.parametrize(
    ("seed", "dtype", "scale_shift"),
    [(1, torch.float32, 0.0), (4, torch.float64, 0.0), (5, torch.float32, 1.5), (6, torch.float32, -1.0)],
)
def test_rasterizer_equals_the_dense_reference(seed: int, dtype: torch.dtype, scale_shift: float) -> None:
    """Small, large (wider than the image: the largest box bucket) and tiny Gaussians, many off the image."""
    camera, scene = _camera(30, 21, dtype), _scene(300, seed=seed, dtype=dtype, degree=3)
    scene["log_scales"] = scene["log_scales"] + scale_shift
    projected = project(scene["means"], covariance_3d(scene["quaternions"], scene["log_scales"]), camera)
    opacities = torch.sigmoid(scene["opacity_logits"])
    colours = sh_colour(scene["sh"], torch.nn.functional.normalize(scene["means"] - camera.centre, dim=-1))
    background = torch.tensor([0.1, 0.2, 0.3], dtype=dtype)
    dense = rasterize_dense(projected, opacities, colours, 30, 21, background)
    sparse = rasterize(projected, opacities, colours, 30, 21, background)
    assert dense[2].amax() > 0.99, "the scene must reach the early-termination rule"
    for a, b in zip(dense, sparse, strict=True):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)


def test_the_footprint_search_in_small_chunks_gives_the_same_image(monkeypatch: pytest.MonkeyPatch) -> None:
    """``BOX_ELEMENTS`` only bounds memory: boxes evaluated a few Gaussians at a time change nothing."""
    camera, scene = _camera(30, 21), _scene(200, seed=8)
    scene["log_scales"] = scene["log_scales"] + 0.5
    whole = render(**scene, camera=camera)
    monkeypatch.setattr(gaussian_splatting, "BOX_ELEMENTS", 40)
    for a, b in zip(whole, render(**scene, camera=camera), strict=True):
        torch.testing.assert_close(a, b)


def test_footprint_keys_past_31_bits_pack_into_int64_and_unpack_to_the_same_pairs() -> None:
    """Keys hold (y, x, rank) bits; a very wide image needs more than 31 and switches to int64."""
    gen = torch.Generator().manual_seed(3)
    n = 40
    means = 16 + 32 * torch.rand(n, 2, generator=gen)
    scale = 0.5 + 2 * torch.rand(n, 2, generator=gen)
    conics = torch.stack([scale[:, 0] ** -2, 0.1 * torch.randn(n, generator=gen), scale[:, 1] ** -2], -1)
    opacities = 0.05 + 0.9 * torch.rand(n, generator=gen)

    def pairs(width: int) -> tuple[torch.dtype, torch.Tensor]:
        level, lo, extent = gaussian_splatting._boxes(means, conics, opacities, width, 64)
        key = gaussian_splatting._footprints(means, conics, level, lo, extent, width, 64)
        return key.dtype, torch.stack(gaussian_splatting._unpack(key, width, n), -1)

    (narrow_type, narrow), (wide_type, wide) = pairs(64), pairs(1 << 24)  # 6 + 6 + 6 bits; 6 + 24 + 6
    assert (narrow_type, wide_type) == (torch.int32, torch.int64)
    assert len(narrow) > 1000
    torch.testing.assert_close(wide, narrow, rtol=0, atol=0)


def test_a_scene_with_nothing_in_view_renders_the_background() -> None:
    camera, scene = _camera(), _scene(5, seed=7)
    scene["means"] = scene["means"] + torch.tensor([500.0, 0.0, 0.0])
    rgb, depth, alpha = render(**scene, camera=camera, background=torch.tensor([0.2, 0.4, 0.6]))
    torch.testing.assert_close(rgb[:, 3, 5], torch.tensor([0.2, 0.4, 0.6]))
    assert depth.abs().max() == 0 and alpha.abs().max() == 0


def test_gaussians_behind_the_camera_are_not_drawn() -> None:
    camera, scene = _camera(), _scene(20, seed=2)
    behind = camera.centre + torch.tensor([0.0, 0.0, 5.0])  # above a nadir camera
    scene["means"] = torch.cat([scene["means"], behind[None]])
    scene["quaternions"] = torch.cat([scene["quaternions"], torch.tensor([[1.0, 0, 0, 0]])])
    scene["log_scales"] = torch.cat([scene["log_scales"], torch.zeros(1, 3)])
    scene["opacity_logits"] = torch.cat([scene["opacity_logits"], torch.tensor([8.0])])
    scene["sh"] = torch.cat([scene["sh"], torch.full((1, 4, 3), 3.0)])
    with_it = render(**scene, camera=camera)
    without = render(**{k: v[:-1] for k, v in scene.items()}, camera=camera)
    for a, b in zip(with_it, without, strict=True):
        torch.testing.assert_close(a, b)


def test_gradients_match_finite_differences() -> None:
    camera, scene = _camera(10, 8, torch.float64), _scene(6, seed=3, dtype=torch.float64)
    scene["log_scales"] = scene["log_scales"] + 0.8  # large enough to cover several pixels
    names = list(scene)

    def image(*tensors: torch.Tensor) -> torch.Tensor:
        rgb, depth, alpha = render(**dict(zip(names, tensors, strict=True)), camera=camera)
        return torch.cat([rgb, depth, alpha])

    inputs = tuple(t.clone().requires_grad_(True) for t in scene.values())
    assert torch.autograd.gradcheck(image, inputs, eps=1e-6, atol=1e-5, rtol=1e-4)


def test_a_pixel_stops_before_the_gaussian_that_would_take_transmittance_below_1e_4() -> None:
    """α = 0.99, 0.98, 0.9 front to back: T goes 1 → 0.01 → 2e-4, and the third (T → 2e-5) is not drawn."""
    camera = _camera(9, 9, torch.float64)
    axis = camera.rotation[:, 2]
    means = torch.stack([camera.centre + d * axis for d in (4.0, 5.0, 6.0)])
    opacity = torch.logit(torch.tensor([0.999, 0.98, 0.9], dtype=torch.float64))
    colours = torch.tensor([0.0, 0.0, 1.0], dtype=torch.float64)[:, None, None].expand(3, 1, 3)
    rgb, _, alpha = render(
        means,
        torch.tensor([[1.0, 0, 0, 0]] * 3).double(),
        torch.zeros(3, 3).double(),
        opacity,
        (colours - 0.5) / SH_C0,
        camera,
    )
    assert rgb[:, 4, 4].abs().max() < 1e-12
    torch.testing.assert_close(alpha[0, 4, 4], torch.tensor(1 - 2e-4, dtype=torch.float64))
