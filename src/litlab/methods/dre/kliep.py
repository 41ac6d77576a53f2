"""KLIEP (Sugiyama et al. 2008): maximise mean_P log(Φθ) subject to mean_Q Φθ = 1 and θ ≥ 0.

The solver is the estimator's own algorithm, projected gradient ascent with a decreasing step schedule
(as in the authors' code and in ``densratio``), so it is a plain loop over steps; it runs every bandwidth
of the grid at once, each accepting steps only while its own objective improves.
"""

from __future__ import annotations

import torch

STEP_SIZES = (1e3, 1e2, 1e1, 1.0, 1e-1, 1e-2, 1e-3)


def _project(theta: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    """Onto {bᵀθ = 1}, then θ ≥ 0, then rescaled so that bᵀθ = 1 (``theta, b, c: (S, m)``)."""
    theta = theta + (1 - (b * theta).sum(-1, keepdim=True)) * c
    theta = theta.clamp_min(0)
    return theta / (b * theta).sum(-1, keepdim=True)


def kliep_score(phi_p: torch.Tensor, theta: torch.Tensor) -> torch.Tensor:
    """mean_P log(Φθ) per bandwidth: ``phi_p: (S, M, m)``, ``theta: (S, m)`` → ``(S,)``."""
    return torch.log(torch.einsum("smb,sb->sm", phi_p, theta)).mean(-1)


def fit_kliep(
    phi_p: torch.Tensor, phi_q: torch.Tensor, step_sizes: tuple[float, ...] = STEP_SIZES, max_inner: int = 100
) -> torch.Tensor:
    """KLIEP coefficients ``(S, m)`` from features ``phi_p: (S, M, m)`` (P) and ``phi_q: (S, N, m)`` (Q).

    Per step size ε, up to ``max_inner`` ascent steps θ ← proj(θ + ε Φ_Pᵀ(1/Φ_Pθ)), stopping (per bandwidth)
    at the first step that does not raise the score; start θ = proj(1).
    """
    b = phi_q.mean(1)
    c = b / b.square().sum(-1, keepdim=True)
    theta = _project(torch.ones_like(b), b, c)
    score = kliep_score(phi_p, theta)
    for eps in step_sizes:
        active = torch.ones_like(score, dtype=torch.bool)
        for _ in range(max_inner):
            ascent = torch.einsum("smb,sm->sb", phi_p, 1 / torch.einsum("smb,sb->sm", phi_p, theta))
            candidate = _project(theta + eps * ascent, b, c)
            candidate_score = kliep_score(phi_p, candidate)
            accept = active & (candidate_score > score)
            theta = torch.where(accept[:, None], candidate, theta)
            score = torch.where(accept, candidate_score, score)
            active = accept
            if not bool(active.any()):
                break
    return theta
