"""The networks every planner shares: observation encoder, x̂_0 decoder (denoiser) and anchor classifier."""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn


def mlp(n_in: int, hidden: int, n_out: int, layers: int) -> nn.Sequential:
    """``layers`` Linear+SiLU blocks of width ``hidden`` (LayerNorm after the first), then Linear."""
    blocks: list[nn.Module] = [nn.Linear(n_in, hidden), nn.LayerNorm(hidden), nn.SiLU()]
    for _ in range(layers - 1):
        blocks += [nn.Linear(hidden, hidden), nn.SiLU()]
    return nn.Sequential(*blocks, nn.Linear(hidden, n_out))


def time_embedding(t: Tensor, dim: int) -> Tensor:
    """``(B, dim)`` sinusoidal embedding of ``t: (B,)`` (in diffusion-step units, 0..1000)."""
    half = dim // 2
    freqs = torch.exp(-math.log(10000.0) * torch.arange(half, device=t.device, dtype=torch.float32) / half)
    angles = t.float()[:, None] * freqs[None]
    return torch.cat([angles.sin(), angles.cos()], dim=-1)


class Encoder(nn.Module):
    """Observation ``(B, obs_dim)`` -> context ``(B, hidden)``."""

    def __init__(self, obs_dim: int, hidden: int = 128, layers: int = 2) -> None:
        super().__init__()
        self.net = mlp(obs_dim, hidden, hidden, layers)

    def forward(self, obs: Tensor) -> Tensor:
        return self.net(obs)


class Denoiser(nn.Module):
    """x̂_0 from (context, noisy plan x_t, anchor, time).

    Shapes ``(B, C), (B, H, 2), (B, H, 2), (B,)`` -> ``(B, H, 2)``.

    The x0-parametrisation of BridgeDrive and DiffusionDrive, with no residual on x_t: an ``x_t + f`` form
    would hand the anchor-started arms (whose x_t is already near the plan) an identity prior that plain
    diffusion and regression lack, so every arm predicts x̂_0 outright. Planners without an anchor (plain
    diffusion) or without x_t (regression) pass zeros.
    """

    def __init__(
        self, context_dim: int, horizon: int, hidden: int = 256, layers: int = 3, time_dim: int = 64
    ) -> None:
        super().__init__()
        self.time_dim = time_dim
        self.net = mlp(context_dim + 4 * horizon + time_dim, hidden, 2 * horizon, layers)

    def forward(self, context: Tensor, x_t: Tensor, anchor: Tensor, t: Tensor) -> Tensor:
        h = torch.cat([context, x_t.flatten(1), anchor.flatten(1), time_embedding(t, self.time_dim)], dim=-1)
        return self.net(h).view_as(x_t)


class AnchorClassifier(nn.Module):
    """Anchor logits ``(B, K)`` from context ``(B, C)``: the policy's p(y | c)."""

    def __init__(self, context_dim: int, n_anchors: int, hidden: int = 128) -> None:
        super().__init__()
        self.net = mlp(context_dim, hidden, n_anchors, 1)

    def forward(self, context: Tensor) -> Tensor:
        return self.net(context)
