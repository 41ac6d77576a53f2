"""DISCo's lifted space and hinge map (plain torch).

Lift: x̂ = [x; −1] for unit corpus tokens, q̂_S = [q; F(S, q)] for query tokens, so that
q̂ᵀx̂ = qᵀx − F(S, q): the query carries the coverage threshold and the corpus side never changes.

Hinge: Φ_w(u) = [u; sign(wᵀu)·u]/√2 with w ~ N(0, I). Then Φ_w(u)ᵀΦ_w(v) = uᵀv when the signs agree
and 0 otherwise, so max_r Φ_{w_r}(q̂)ᵀΦ_{w_r}(x̂) over R hyperplanes keeps a positive gain unless all R
sign tests disagree (probability < 2^−R) and keeps a negative one only if all R agree: a MaxSim engine
run on Φ vectors sums Σ_q max_x [qᵀx − F(S, q)]₊, the marginal gain. Signs are stored as R-bit codes.
"""

from __future__ import annotations

import math

import torch


def lift_corpus(x: torch.Tensor) -> torch.Tensor:
    """x̂ = [normalize(x); −1]: (n, d) -> (n, d+1). Normalise first, then append (the paper's order)."""
    x = torch.nn.functional.normalize(x.float(), dim=-1)
    return torch.cat([x, -torch.ones(len(x), 1)], dim=1)


def lift_queries(q: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
    """q̂_S = [q; F(S, q)]: (m, d), (m,) -> (m, d+1)."""
    return torch.cat([q.float(), state.float()[:, None]], dim=1)


def hyperplanes(replicas: int, dim: int, seed: int) -> torch.Tensor:
    """R Gaussian hyperplanes w_r ~ N(0, I): (R, dim), seeded."""
    if not 1 <= replicas <= 30:
        raise ValueError(f"replicas must be in 1..30 (R-bit codes), got {replicas}")
    return torch.randn(replicas, dim, generator=torch.Generator().manual_seed(seed))


def hinge(u: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """Φ_w(u) = [u; sign(wᵀu)·u]/√2 (sign(0) = +1): (n, D), (D,) -> (n, 2D)."""
    sign = torch.where(u @ w >= 0, 1.0, -1.0)[:, None]
    return torch.cat([u, sign * u], dim=1) / math.sqrt(2.0)


def sign_codes(u: torch.Tensor, planes: torch.Tensor) -> torch.Tensor:
    """Bit r of code[i] is 1 iff w_rᵀu_i ≥ 0: (n, D), (R, D) -> (n,) int32."""
    bits = (u.float() @ planes.T >= 0).int()
    return (bits << torch.arange(planes.shape[0], dtype=torch.int32)).sum(1, dtype=torch.int32)


def agreeing(code_x: torch.Tensor, code_q: torch.Tensor, usable: torch.Tensor) -> torch.Tensor:
    """True where some replica r among the ``usable`` bits has bit_r(x) = bit_r(q) (broadcasts)."""
    return ((code_x ^ code_q) & usable) != usable
