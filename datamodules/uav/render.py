"""The scene representation: a learnable colour texture draped over the LiDAR height field.

Rendering a view casts every pixel's ray onto the height field and reads the texture bilinearly at the
hit point, so a render is differentiable in the texture and costs two ``grid_sample`` passes per
fixed-point step. See the method README for why this replaces Gaussian splatting at our scale.
"""

from __future__ import annotations

import torch
from torch import nn

from litlab.datamodules.uav.geometry import HeightField, Intrinsics, sample_grid, world_points

LUMA = (0.299, 0.587, 0.114)


def luminance(rgb: torch.Tensor) -> torch.Tensor:
    """Rec. 601 luminance ``(…, 1, H, W)`` of linear colour ``rgb (…, 3, H, W)``."""
    weights = torch.tensor(LUMA, dtype=rgb.dtype, device=rgb.device)
    return (rgb * weights[:, None, None]).sum(dim=-3, keepdim=True)


def log_luminance(rgb: torch.Tensor, dark: float = 0.01, gain: float = 1.0) -> torch.Tensor:
    """Log of ``gain·luminance + dark`` ``(…, 1, H, W)``: what an event pixel's photoreceptor tracks.

    ``dark`` (dark current) keeps the log finite and makes contrast fall in low light (small ``gain``).
    """
    return torch.log(gain * luminance(rgb) + dark)


class GroundTexture(nn.Module):
    """Linear RGB albedo on a ``(height, width)`` texel grid over world ``bounds = (x0, x1, y0, y1)``.

    Stored as logits so colours stay in (0, 1); ``forward(xy (…, 2)) -> (…, 3)`` samples bilinearly.
    """

    def __init__(
        self,
        bounds: tuple[float, float, float, float],
        height: int,
        width: int,
        init: torch.Tensor | float = 0.5,
        trainable: bool = True,
    ) -> None:
        super().__init__()
        self.bounds = tuple(float(b) for b in bounds)
        albedo = torch.as_tensor(init, dtype=torch.float32).expand(3, height, width).clamp(1e-4, 1 - 1e-4)
        self.logits = nn.Parameter(torch.logit(albedo).clone(), requires_grad=trainable)

    @classmethod
    def from_image(cls, image: torch.Tensor, bounds: tuple[float, float, float, float]) -> GroundTexture:
        """A fixed (ground-truth) texture from an albedo ``image (3, H, W)``."""
        return cls(bounds, image.shape[1], image.shape[2], init=image, trainable=False)

    def albedo(self) -> torch.Tensor:
        """The texture as colours ``(3, H, W)``."""
        return torch.sigmoid(self.logits)

    def forward(self, xy: torch.Tensor) -> torch.Tensor:
        x0, x1, y0, y1 = self.bounds
        coords = torch.stack(
            [2 * (xy[..., 0] - x0) / (x1 - x0) - 1, 2 * (xy[..., 1] - y0) / (y1 - y0) - 1], -1
        )
        return sample_grid(self.albedo(), coords).movedim(0, -1)


def render(
    texture: GroundTexture,
    surface: HeightField,
    intrinsics: Intrinsics,
    rotation: torch.Tensor,
    centre: torch.Tensor,
    supersample: int = 1,
) -> torch.Tensor:
    """Linear RGB images ``(B, 3, H, W)`` of the textured surface from cameras ``(B, 3, 3), (B, 3)``.

    ``supersample`` s > 1 averages an s×s grid of rays per pixel: the pixel's area integral, which a
    real sensor measures and which keeps fine texture from aliasing.
    """
    points = world_points(intrinsics, rotation, centre, surface, supersample=supersample)  # (B, H*W*s², 3)
    rgb = (
        texture(points[..., :2]).reshape(-1, intrinsics.height * intrinsics.width, supersample**2, 3).mean(2)
    )
    return rgb.transpose(-1, -2).reshape(-1, 3, intrinsics.height, intrinsics.width)


def render_depth(
    surface: HeightField, intrinsics: Intrinsics, rotation: torch.Tensor, centre: torch.Tensor
) -> torch.Tensor:
    """Z-depth maps ``(B, H, W)`` of the height field (what a LiDAR depth image holds)."""
    points = world_points(intrinsics, rotation, centre, surface)
    depth = ((points - centre[:, None, :]) @ rotation)[..., 2]
    return depth.reshape(-1, intrinsics.height, intrinsics.width)
