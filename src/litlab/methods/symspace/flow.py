"""Conditional flow matching on the OT path: the training loss and ODE samplers (Euler, dopri5)."""

from __future__ import annotations

from collections.abc import Callable

import torch

# v(t (B,), x (B, C, H, W)) -> velocity (B, C, H, W); the condition is bound in by the caller.
VelocityField = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def ot_path(
    x0: torch.Tensor, x1: torch.Tensor, t: torch.Tensor, sigma_min: float
) -> tuple[torch.Tensor, ...]:
    """ψ_t = (1 − (1−σ)t)·x0 + t·x1 and its velocity x1 − (1−σ)·x0 (Lipman et al. 2023); t (B,)."""
    tt = t.view(-1, *([1] * (x0.dim() - 1)))
    return (1 - (1 - sigma_min) * tt) * x0 + tt * x1, x1 - (1 - sigma_min) * x0


def cfm_loss(velocity: VelocityField, x1: torch.Tensor, sigma_min: float = 1e-6) -> torch.Tensor:
    """Summed squared error of v(t, ψ_t) against the OT target over the batch size (the code's scale)."""
    x0 = torch.randn_like(x1)
    t = torch.rand(x1.shape[0], device=x1.device, dtype=x1.dtype)
    psi, target = ot_path(x0, x1, t, sigma_min)
    return (velocity(t, psi) - target).square().sum() / x1.shape[0]


def sample(velocity: VelocityField, x0: torch.Tensor, steps: int = 20, method: str = "euler") -> torch.Tensor:
    """Integrate dx/dt = v(t, x) from noise x0 at t=0 to t=1: ``euler`` with ``steps`` steps or ``dopri5``."""
    if method == "dopri5":
        from torchdiffeq import odeint

        times = torch.tensor([0.0, 1.0], device=x0.device, dtype=x0.dtype)
        return odeint(lambda t, x: velocity(t.expand(x.shape[0]), x), x0, times, rtol=1e-5, atol=1e-5)[-1]
    if method != "euler":
        raise ValueError(f"sampler must be 'euler' or 'dopri5', got {method!r}")
    x, dt = x0, 1.0 / steps
    for i in range(steps):
        x = x + dt * velocity(torch.full((x.shape[0],), i * dt, device=x.device, dtype=x.dtype), x)
    return x
