"""Encoder, AdaGN-conditioned U-Net velocity field and VAE decoder for images; their MLP twins for vectors."""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F


def conv_trunk(in_channels: int, widths: tuple[int, ...] = (32, 32, 64, 64)) -> nn.Sequential:
    """Stride-2 4×4 convolutions with SiLU: (B, C, H, W) -> (B, widths[-1], H / 2^L, W / 2^L)."""
    layers: list[nn.Module] = []
    for width in widths:
        layers += [nn.Conv2d(in_channels, width, 4, stride=2, padding=1), nn.SiLU()]
        in_channels = width
    return nn.Sequential(*layers)


class Encoder(nn.Module):
    """φ: image (B, C, H, W) -> coefficient vector (B, n_out) through a 4-layer stride-2 CNN and an MLP."""

    def __init__(self, image_shape: tuple[int, int, int], n_out: int, hidden: int = 256) -> None:
        super().__init__()
        channels, height, width = image_shape
        self.trunk = conv_trunk(channels)
        flat = 64 * (height // 16) * (width // 16)
        self.head = nn.Sequential(nn.Flatten(), nn.Linear(flat, hidden), nn.SiLU(), nn.Linear(hidden, n_out))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.trunk(x))


def time_features(t: torch.Tensor) -> torch.Tensor:
    """t (B,) in [0, 1] -> (B, 4): sin/cos of πt and 2πt (the decoder's 4 time channels)."""
    angles = math.pi * t[:, None] * torch.tensor([1.0, 2.0], device=t.device, dtype=t.dtype)
    return torch.cat([angles.sin(), angles.cos()], dim=1)


class AdaGN(nn.Module):
    """Adaptive group norm: GN(h) · (1 + γ(e)) + β(e), with (γ, β) a linear map of the embedding e."""

    def __init__(self, channels: int, embed_dim: int, groups: int = 8) -> None:
        super().__init__()
        self.norm = nn.GroupNorm(min(groups, channels), channels, affine=False)
        self.film = nn.Linear(embed_dim, 2 * channels)
        nn.init.zeros_(self.film.weight)
        nn.init.zeros_(self.film.bias)

    def forward(self, h: torch.Tensor, embedding: torch.Tensor) -> torch.Tensor:
        gamma, beta = self.film(embedding)[:, :, None, None].chunk(2, dim=1)
        return self.norm(h) * (1 + gamma) + beta


class ResBlock(nn.Module):
    """h + conv(SiLU(AdaGN(conv(SiLU(AdaGN(h)))))) with a 1×1 skip when the width changes."""

    def __init__(self, in_channels: int, out_channels: int, embed_dim: int) -> None:
        super().__init__()
        self.norm1 = AdaGN(in_channels, embed_dim)
        self.conv1 = nn.Conv2d(in_channels, out_channels, 3, padding=1)
        self.norm2 = AdaGN(out_channels, embed_dim)
        self.conv2 = nn.Conv2d(out_channels, out_channels, 3, padding=1)
        self.skip = nn.Identity() if in_channels == out_channels else nn.Conv2d(in_channels, out_channels, 1)

    def forward(self, h: torch.Tensor, embedding: torch.Tensor) -> torch.Tensor:
        out = self.conv1(F.silu(self.norm1(h, embedding)))
        out = self.conv2(F.silu(self.norm2(out, embedding)))
        return self.skip(h) + out


class ConditionalUNet(nn.Module):
    """Velocity field v(t, x | cond): a 3-level U-Net (widths w, 2w, 4w) with AdaGN conditioning.

    x (B, C, H, W), t (B,), cond (B, cond_dim) -> (B, C, H, W). Time enters as 4 sin/cos input
    channels and, with the condition, through the AdaGN embedding. H and W must be divisible by 4.
    ``normalize_condition`` layer-normalises the condition first (it keeps a condition whose spread
    across images is tiny from vanishing); ``condition_channels`` > 0 also projects it to that many
    channels broadcast over the image and concatenated to the stem input.
    """

    def __init__(
        self,
        channels: int,
        cond_dim: int,
        width: int = 32,
        embed_dim: int = 128,
        normalize_condition: bool = False,
        condition_channels: int = 0,
    ) -> None:
        super().__init__()
        self.condition_norm = (
            nn.LayerNorm(cond_dim, elementwise_affine=False) if normalize_condition else nn.Identity()
        )
        self.condition_channels = nn.Linear(cond_dim, condition_channels) if condition_channels > 0 else None
        self.embed = nn.Sequential(
            nn.Linear(cond_dim + 4, embed_dim), nn.SiLU(), nn.Linear(embed_dim, embed_dim)
        )
        w1, w2, w3 = width, 2 * width, 4 * width
        self.stem = nn.Conv2d(channels + 4 + condition_channels, w1, 3, padding=1)
        self.down1 = ResBlock(w1, w1, embed_dim)
        self.pool1 = nn.Conv2d(w1, w2, 3, stride=2, padding=1)
        self.down2 = ResBlock(w2, w2, embed_dim)
        self.pool2 = nn.Conv2d(w2, w3, 3, stride=2, padding=1)
        self.middle = ResBlock(w3, w3, embed_dim)
        self.up2 = ResBlock(w3 + w2, w2, embed_dim)
        self.up1 = ResBlock(w2 + w1, w1, embed_dim)
        self.out = nn.Sequential(
            nn.GroupNorm(min(8, w1), w1), nn.SiLU(), nn.Conv2d(w1, channels, 3, padding=1)
        )
        nn.init.zeros_(self.out[-1].weight)
        nn.init.zeros_(self.out[-1].bias)

    def forward(self, t: torch.Tensor, x: torch.Tensor, cond: torch.Tensor) -> torch.Tensor:
        tf = time_features(t)
        cond = self.condition_norm(cond)
        e = self.embed(torch.cat([cond, tf], dim=1))
        per_image = [tf] if self.condition_channels is None else [tf, self.condition_channels(cond)]
        planes = torch.cat(per_image, dim=1)[:, :, None, None].expand(-1, -1, *x.shape[2:])
        h1 = self.down1(self.stem(torch.cat([x, planes], 1)), e)
        h2 = self.down2(self.pool1(h1), e)
        h = self.middle(self.pool2(h2), e)
        h = self.up2(torch.cat([F.interpolate(h, scale_factor=2.0), h2], 1), e)
        h = self.up1(torch.cat([F.interpolate(h, scale_factor=2.0), h1], 1), e)
        return self.out(h)


class VAEDecoder(nn.Module):
    """z (B, latent) -> pixel logits (B, C, H, W): an MLP then four stride-2 transposed convolutions."""

    def __init__(self, image_shape: tuple[int, int, int], latent_dim: int, hidden: int = 256) -> None:
        super().__init__()
        channels, height, width = image_shape
        self.start = (64, height // 16, width // 16)
        self.mlp = nn.Sequential(
            nn.Linear(latent_dim, hidden), nn.SiLU(), nn.Linear(hidden, math.prod(self.start))
        )
        layers: list[nn.Module] = [nn.SiLU()]
        for in_c, out_c in [(64, 64), (64, 32), (32, 32)]:
            layers += [nn.ConvTranspose2d(in_c, out_c, 4, stride=2, padding=1), nn.SiLU()]
        layers.append(nn.ConvTranspose2d(32, channels, 4, stride=2, padding=1))
        self.deconv = nn.Sequential(*layers)

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        return self.deconv(self.mlp(z).view(-1, *self.start))


def mlp(n_in: int, n_out: int, hidden: int, depth: int = 3) -> nn.Sequential:
    """``depth`` linear layers with SiLU between them: (B, n_in) -> (B, n_out)."""
    sizes = [n_in] + [hidden] * (depth - 1) + [n_out]
    layers: list[nn.Module] = []
    for a, b in zip(sizes[:-1], sizes[1:], strict=True):
        layers += [nn.Linear(a, b), nn.SiLU()]
    return nn.Sequential(*layers[:-1])


class VectorEncoder(nn.Module):
    """φ for vector data: x (B, D) -> coefficient vector (B, n_out), an MLP (the synthetic problem's)."""

    def __init__(self, dim: int, n_out: int, hidden: int = 128) -> None:
        super().__init__()
        self.net = mlp(dim, n_out, hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


class ConditionalMLP(nn.Module):
    """Velocity field v(t, x | cond) for vector data: an MLP on [x, 4 time features, cond] -> (B, D).

    ``normalize_condition`` layer-normalises the condition first, as in :class:`ConditionalUNet`.
    """

    def __init__(self, dim: int, cond_dim: int, hidden: int = 128, normalize_condition: bool = False) -> None:
        super().__init__()
        self.condition_norm = (
            nn.LayerNorm(cond_dim, elementwise_affine=False) if normalize_condition else nn.Identity()
        )
        self.net = mlp(dim + 4 + cond_dim, dim, hidden, depth=4)

    def forward(self, t: torch.Tensor, x: torch.Tensor, cond: torch.Tensor) -> torch.Tensor:
        return self.net(torch.cat([x, time_features(t), self.condition_norm(cond)], dim=1))
