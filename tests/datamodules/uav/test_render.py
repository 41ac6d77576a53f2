"""The renderer: exact on a flat textured ground, and its gradients match finite differences."""

from __future__ import annotations

import torch

from litlab.datamodules.uav.geometry import HeightField, Intrinsics, nadir_rotation
from litlab.datamodules.uav.render import GroundTexture, log_luminance, luminance, render, render_depth


def tiny_scene(dtype: torch.dtype = torch.float64) -> tuple:
    bounds = (-20.0, 20.0, -20.0, 20.0)
    surface = HeightField(
        torch.tensor([[0.0, 1.0, 0.5], [2.0, 0.0, 1.0], [0.0, 0.5, 0.0]], dtype=dtype), bounds
    )
    texture = GroundTexture(bounds, 5, 6, init=0.5).to(dtype)
    with torch.no_grad():
        texture.logits.normal_(generator=torch.Generator().manual_seed(0))
    k = Intrinsics.from_fov(5, 4, 40.0)
    rotation = nadir_rotation(torch.tensor([0.2, -0.4], dtype=dtype))
    centre = torch.tensor([[1.0, 2.0, 30.0], [-3.0, 0.5, 28.0]], dtype=dtype)
    return texture, surface, k, rotation, centre


class Scene(torch.nn.Module):
    """The whole render path (ray cast, texture lookup, log luminance) as a module of the texture."""

    def __init__(self, texture: GroundTexture, surface: HeightField, k: Intrinsics, rotation, centre) -> None:
        super().__init__()
        self.texture, self.surface, self.k, self.rotation, self.centre = texture, surface, k, rotation, centre

    def forward(self) -> torch.Tensor:
        rgb = render(self.texture, self.surface, self.k, self.rotation, self.centre)
        return torch.cat([rgb, log_luminance(rgb)], dim=1)


def test_render_gradients_match_finite_differences() -> None:
    scene = Scene(*tiny_scene())
    logits = scene.texture.logits.detach().clone().requires_grad_(True)

    def images(x: torch.Tensor) -> torch.Tensor:
        return torch.func.functional_call(scene, {"texture.logits": x}, ())

    assert images(logits).shape == (2, 4, 4, 5)
    assert torch.autograd.gradcheck(images, (logits,), eps=1e-6, atol=1e-6)


def test_flat_constant_ground_renders_its_colour_and_depth() -> None:
    bounds = (-50.0, 50.0, -50.0, 50.0)
    surface = HeightField(torch.full((2, 2), 3.0), bounds)
    colour = torch.tensor([0.2, 0.6, 0.9])[:, None, None].expand(3, 4, 4)
    texture = GroundTexture.from_image(colour, bounds)
    k = Intrinsics.from_fov(6, 4, 50.0)
    rotation, centre = nadir_rotation(torch.tensor([0.5])), torch.tensor([[0.0, 0.0, 43.0]])
    image = render(texture, surface, k, rotation, centre)
    assert torch.allclose(image, colour[:, :1, :1].expand(1, 3, 4, 6), atol=1e-4)
    assert torch.allclose(render_depth(surface, k, rotation, centre), torch.full((1, 4, 6), 40.0), atol=1e-3)
    assert torch.allclose(luminance(image), torch.full((1, 1, 4, 6), 0.299 * 0.2 + 0.587 * 0.6 + 0.114 * 0.9))
