"""The torch 3DGS renderer against gsplat (the `splat` extra), the rasteriser 3DGS users train with.

On a CPU: the projection (means, conics, depths) and SH colour against gsplat's own pure-torch reference
(``gsplat.cuda._torch_impl``, which its CUDA kernels are tested against); gsplat's compositing is a CUDA
kernel only. On a GPU: whole images against ``gsplat.rasterization`` (RGB and opacity within 1e-4).
gsplat puts pixel centres at half-integers, litlab at integers: gsplat's principal point is ours + 0.5.
gsplat clamps α at 0.999 where 3DGS and litlab clamp at 0.99, so the scenes keep opacities below 0.95.
"""

from __future__ import annotations

import pytest
import torch

from litlab.kernels.gaussian_splatting import (
    Camera,
    covariance_3d,
    gsplat_view,
    project,
    render,
    render_with_gsplat,
    sh_colour,
)

pytest.importorskip("gsplat", reason="gsplat is the `splat` extra (pip install -e '.[splat]')")
torch_impl = pytest.importorskip("gsplat.cuda._torch_impl")


def _camera(device: str = "cpu") -> Camera:
    """An oblique camera 12 m up, looking 35° off nadir, 48×64 pixels."""
    pitch = torch.tensor(35.0).deg2rad()
    forward = torch.stack([torch.zeros(()), pitch.sin(), -pitch.cos()])
    right = torch.tensor([1.0, 0.0, 0.0])
    down = torch.linalg.cross(forward, right)
    rotation = torch.stack([right, down, forward], 1)  # camera-to-world, OpenCV axes as columns
    return Camera(
        rotation.to(device), torch.tensor([0.0, -8.0, 12.0], device=device), 60.0, 58.0, 31.5, 23.5, 64, 48
    )


def _scene(n: int, degree: int, device: str = "cpu") -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(3)
    scene = {
        "means": torch.cat([torch.rand(n, 2, generator=g) * 16 - 8, torch.rand(n, 1, generator=g) * 4], 1),
        "quaternions": torch.randn(n, 4, generator=g),
        "log_scales": torch.rand(n, 3, generator=g) * 2 - 2.5,
        "opacity_logits": torch.rand(n, generator=g) * 4 - 2,  # opacities 0.12-0.88: α stays under 0.99
        "sh": torch.randn(n, (degree + 1) ** 2, 3, generator=g) * 0.3,
    }
    return {k: v.to(device) for k, v in scene.items()}


def test_projection_matches_gsplats_torch_reference() -> None:
    camera, scene = _camera(), _scene(400, degree=1)
    ours = project(scene["means"], covariance_3d(scene["quaternions"], scene["log_scales"]), camera)
    covars, _ = torch_impl._quat_scale_to_covar_preci(
        scene["quaternions"], scene["log_scales"].exp(), compute_preci=False
    )
    viewmat, K = gsplat_view(camera)
    radii, means2d, depths, conics, _ = torch_impl._fully_fused_projection(
        scene["means"], covars, viewmat[None], K[None], camera.width, camera.height
    )
    valid = (radii[0] > 0).all(-1)  # in front of the camera and overlapping the image
    assert 100 < int(valid.sum()) < 400  # the scene has Gaussians on screen and beyond it
    assert bool(ours.visible[valid].all())
    torch.testing.assert_close(ours.means[valid] + 0.5, means2d[0][valid], rtol=1e-5, atol=1e-4)
    torch.testing.assert_close(ours.depths[valid], depths[0][valid], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(ours.conics[valid], conics[0][valid], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("degree", [0, 1, 2, 3])
def test_sh_colour_matches_gsplats_torch_reference(degree: int) -> None:
    camera, scene = _camera(), _scene(300, degree=degree)
    directions = torch.nn.functional.normalize(scene["means"] - camera.centre, dim=-1)
    theirs = (torch_impl._spherical_harmonics(degree, directions, scene["sh"]) + 0.5).clamp_min(0.0)
    torch.testing.assert_close(sh_colour(scene["sh"], directions), theirs, rtol=1e-5, atol=1e-6)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="gsplat's rasteriser is a CUDA kernel")
def test_images_match_gsplat_on_a_gpu() -> None:
    camera, scene = _camera("cuda"), _scene(2000, degree=1, device="cuda")
    background = torch.tensor([0.1, 0.2, 0.3], device="cuda")
    rgb, _, opacity = render(**scene, camera=camera, background=background)
    theirs, their_opacity = render_with_gsplat(**scene, camera=camera, background=background)
    assert float((rgb - theirs).abs().max()) <= 1e-4
    assert float((opacity - their_opacity).abs().max()) <= 1e-4
