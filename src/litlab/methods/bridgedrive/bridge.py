"""The VP diffusion bridge of BridgeDrive (DDBM's VP bridge, as in the official NAVSIM head) and its
deterministic DBIM sampler. Plain tensors; t in [0, T] with T = 1.

Schedule: log α_t = -β_d t²/4 - β_min t/2, σ_t² = 1 - α_t²,
SNR_t = α_t²/σ_t² = 1/(exp(β_d t²/2 + β_min t) - 1).
Bridge marginal q(x_t | x_0, x_T) = N(a_t x_T + b_t x_0, c_t² I) with r_t = SNR_T/SNR_t,
a_t = r_t α_t/α_T, b_t = α_t (1 - r_t), c_t = σ_t √(1 - r_t): x_T is the anchor, x_0 the plan.
"""

from __future__ import annotations

import torch
from torch import Tensor


class VPBridge:
    """Coefficients of the VP bridge from x_0 (t = 0) to x_T (t = T).

    Args:
        beta_d, beta_min: the VP schedule (official config: β_d = 1, β_min = 0.1).
        T: bridge end time.
    """

    def __init__(self, beta_d: float = 1.0, beta_min: float = 0.1, T: float = 1.0) -> None:
        self.beta_d, self.beta_min, self.T = beta_d, beta_min, T

    def _exponent(self, t: Tensor) -> Tensor:
        """β_d t²/2 + β_min t = -2 log α_t."""
        return 0.5 * self.beta_d * t**2 + self.beta_min * t

    def alpha(self, t: Tensor) -> Tensor:
        return torch.exp(-0.5 * self._exponent(t))

    def sigma(self, t: Tensor) -> Tensor:
        return torch.sqrt(-torch.expm1(-self._exponent(t)))

    def coefficients(self, t: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """(a_t, b_t, c_t), each shaped like ``t``; exact at t = 0 (0, 1, 0) and t = T (1, 0, 0)."""
        t = torch.as_tensor(t, dtype=torch.float64)
        big_t = torch.full_like(t, self.T)
        r = torch.expm1(self._exponent(t)) / torch.expm1(self._exponent(big_t))  # SNR_T / SNR_t
        alpha_t, alpha_big = self.alpha(t), self.alpha(big_t)
        a = r * alpha_t / alpha_big
        b = alpha_t * (1 - r)
        c = self.sigma(t) * torch.sqrt((1 - r).clamp_min(0))
        return a, b, c

    def marginal(self, x0: Tensor, xT: Tensor, t: Tensor, noise: Tensor) -> Tensor:
        """A sample x_t = a_t x_T + b_t x_0 + c_t ε; ``x0, xT, noise: (B, ...)``, ``t: (B,)``."""
        a, b, c = (v.to(x0.dtype).view(-1, *[1] * (x0.dim() - 1)) for v in self.coefficients(t))
        return a * xT + b * x0 + c * noise

    def time_grid(self, steps: int) -> Tensor:
        """``(steps + 1,)`` uniform times T = t_0 > ... > t_steps = 0."""
        if steps < 1:
            raise ValueError(f"steps must be >= 1, got {steps}")
        return torch.linspace(self.T, 0.0, steps + 1, dtype=torch.float64)

    @torch.no_grad()
    def sample(self, denoiser, xT: Tensor, steps: int, generator: torch.Generator | None = None) -> Tensor:
        """Deterministic DBIM (η = 0) sampling from the anchor ``xT: (B, ...)`` in ``steps`` network calls.

        ``denoiser(x_t, t (B,), xT) -> x̂_0``. First step (c_T = 0) uses booting noise:
        x_s = a_s x_T + b_s x̂_0 + c_s ε; later steps reuse the implied noise:
        x_s = a_s x_T + b_s x̂_0 + (c_s / c_t)(x_t - a_t x_T - b_t x̂_0).
        """
        grid = self.time_grid(steps)
        a, b, c = (v.to(xT.dtype) for v in self.coefficients(grid))
        x = xT
        for i in range(steps):
            t = grid[i].to(xT.dtype).expand(xT.shape[0])
            x0_hat = denoiser(x, t, xT)
            if i == 0:
                noise = torch.randn(xT.shape, generator=generator, dtype=xT.dtype).to(xT.device)
            else:
                noise = (x - a[i] * xT - b[i] * x0_hat) / c[i]
            x = a[i + 1] * xT + b[i + 1] * x0_hat + c[i + 1] * noise
        return x
