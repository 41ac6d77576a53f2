"""Weight-space generators on one backbone: DeepWeightFlow's conditional flow matching and a DDPM baseline.

Vectors are flattened (optionally PCA-reduced) canonical weights, ``x: (batch, d)``.
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torchdiffeq import odeint


class VelocityNet(nn.Module):
    """DeepWeightFlow's v_θ(x, t): a time MLP 1→64→64 (GELU) and a trunk on [x, t_emb]:
    Linear(d+64→h)-LN-GELU-Dropout-Linear(h→h/2)-LN-GELU-Dropout-Linear(h/2→h)-LN-GELU-Linear(h→d),
    the last layer zero-initialised. ``x: (batch, d)``, ``t: (batch,)`` in [0, 1] -> ``(batch, d)``."""

    def __init__(self, dim: int, hidden: int = 256, time_dim: int = 64, dropout: float = 0.1) -> None:
        super().__init__()
        self.time = nn.Sequential(nn.Linear(1, time_dim), nn.GELU(), nn.Linear(time_dim, time_dim))
        half = hidden // 2
        self.trunk = nn.Sequential(
            nn.Linear(dim + time_dim, hidden), nn.LayerNorm(hidden), nn.GELU(), nn.Dropout(dropout),
            nn.Linear(hidden, half), nn.LayerNorm(half), nn.GELU(), nn.Dropout(dropout),
            nn.Linear(half, hidden), nn.LayerNorm(hidden), nn.GELU(),
            nn.Linear(hidden, dim),
        )  # fmt: skip
        nn.init.zeros_(self.trunk[-1].weight)
        nn.init.zeros_(self.trunk[-1].bias)

    def forward(self, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        return self.trunk(torch.cat([x, self.time(t.reshape(-1, 1).to(x.dtype))], dim=1))


def flow_matching_loss(
    net: nn.Module, x1: torch.Tensor, source_std: float = 0.01, sigma: float = 0.001
) -> torch.Tensor:
    """Linear-path CFM with random pairing: x₀ ~ N(0, σ_s²I), x_t = (1−t)x₀ + t·x₁ + σε,
    loss = mean ‖v(x_t, t) − (x₁ − x₀)‖² per coordinate. ``x1: (batch, d)``."""
    x0 = torch.randn_like(x1) * source_std
    t = torch.rand(len(x1), 1, device=x1.device, dtype=x1.dtype)
    xt = (1 - t) * x0 + t * x1 + sigma * torch.randn_like(x1)
    return nn.functional.mse_loss(net(xt, t[:, 0]), x1 - x0)


@torch.no_grad()
def sample_flow(
    net: nn.Module,
    n: int,
    dim: int,
    source_std: float = 0.01,
    steps: int = 100,
    method: str = "rk4",
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Integrate dx/dt = v(x, t) from x₀ ~ N(0, σ_s²I) over a ``steps``-point grid on [0, 1] with a
    fixed-step torchdiffeq solver (``rk4`` or ``euler``). Returns ``(n, dim)``."""
    device = next(net.parameters()).device
    x0 = torch.randn(n, dim, generator=generator).to(device) * source_std
    grid = torch.linspace(0, 1, steps, device=device)
    return odeint(lambda t, x: net(x, t.expand(len(x))), x0, grid, method=method)[-1]


class DDPMSchedule(nn.Module):
    """Linear β schedule β₁..β_T; ``alpha_bar[t] = Π_{s≤t}(1 − β_s)`` (t is 0-based)."""

    def __init__(self, timesteps: int = 1000, beta_start: float = 1e-4, beta_end: float = 0.02) -> None:
        super().__init__()
        betas = torch.linspace(beta_start, beta_end, timesteps, dtype=torch.float64)
        self.register_buffer("betas", betas.float())
        self.register_buffer("alpha_bar", torch.cumprod(1 - betas, 0).float())
        self.timesteps = timesteps


def ddpm_loss(
    net: nn.Module, schedule: DDPMSchedule, x0: torch.Tensor, prediction: str = "sample"
) -> torch.Tensor:
    """x_t = √ᾱ_t x₀ + √(1−ᾱ_t) ε; the net sees (x_t, t/T) and predicts x₀ (``sample``) or ε (``epsilon``);
    loss = mean squared error of that prediction. ``x0: (batch, d)``."""
    t = torch.randint(0, schedule.timesteps, (len(x0),), device=x0.device)
    a = schedule.alpha_bar[t][:, None]
    noise = torch.randn_like(x0)
    xt = a.sqrt() * x0 + (1 - a).sqrt() * noise
    return nn.functional.mse_loss(
        net(xt, t.float() / schedule.timesteps), x0 if prediction == "sample" else noise
    )


@torch.no_grad()
def sample_ddpm(
    net: nn.Module,
    schedule: DDPMSchedule,
    n: int,
    dim: int,
    generator: torch.Generator | None = None,
    prediction: str = "sample",
) -> torch.Tensor:
    """Ancestral sampling over all T steps (σ_t² = β_t) from x_T ~ N(0, I); an x₀ prediction is turned
    into ε̂ = (x_t − √ᾱ_t x̂₀)/√(1−ᾱ_t). Returns ``(n, dim)``."""
    device = schedule.betas.device
    x = torch.randn(n, dim, generator=generator).to(device)
    for t in reversed(range(schedule.timesteps)):
        beta, a = schedule.betas[t], schedule.alpha_bar[t]
        out = net(x, torch.full((n,), t / schedule.timesteps, device=device))
        eps = out if prediction == "epsilon" else (x - a.sqrt() * out) / (1 - a).sqrt()
        x = (x - beta / (1 - a).sqrt() * eps) / math.sqrt(1 - float(beta))
        if t > 0:
            x = x + beta.sqrt() * torch.randn(n, dim, generator=generator).to(device)
    return x
