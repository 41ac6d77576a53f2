"""The TPNN basis: products of centred sigmoid ridge functions over a variable subset (plain torch).

A node k has a subset S_k of the p inputs and, for each j in S_k, a location b_kj and a log-temperature
l_kj (gamma_kj = exp(l_kj)). With s_kj(x) = sigmoid((x_j - b_kj) / gamma_kj), its basis function is

    phi_k(x) = prod_{j in S_k} [1 - s_kj(x) + c_kj s_kj(x)],   c_kj = -(1 - m_kj) / m_kj,

where m_kj is the mean of s_kj over the training inputs. Each factor then averages to zero over the
training data (the sum-to-zero condition that makes the functional ANOVA components unique); since
c - 1 = -1/m the factor is also 1 - s/m. The official ANOVA-TPNN code computes the ratio from
training-batch sums and freezes it for evaluation: ``sum_to_zero_constants`` is that computation, and
``basis`` takes the frozen constants.

Nodes are stored gathered: ``vars: (K, D)`` long indices sorted ascending and padded with ``p`` (the
padding marks unused positions), ``b, log_gamma: (K, D)``; padding positions contribute a factor 1.
Inputs enter as ``xt = by_variable(x)``, shape ``(p + 1, n)``: one row per variable (contiguous rows are
gathered fastest) and a last row for the padding variable.
"""

from __future__ import annotations

import torch

# m_kj is kept inside (EPS, 1 - EPS) so that a location beyond every training point (m -> 0) gives a
# large but finite constant; the factor's training mean is then zero up to EPS.
EPS = 1e-9


def by_variable(x: torch.Tensor) -> torch.Tensor:
    """``x: (n, p)`` as ``(p + 1, n)`` rows, the last (zeros) standing for padding positions."""
    return torch.cat([x.T, torch.zeros(1, x.shape[0], dtype=x.dtype)]).contiguous()


def sigmoid_ridges(
    xt: torch.Tensor, vars: torch.Tensor, b: torch.Tensor, log_gamma: torch.Tensor
) -> torch.Tensor:
    """s_kj(x_i) = sigmoid((x_ij - b_kj) / gamma_kj): (K, D, n)."""
    return torch.sigmoid((xt[vars] - b[..., None]) * torch.exp(-log_gamma)[..., None])


def _product(h: torch.Tensor) -> torch.Tensor:
    """prod over the D axis of ``h: (K, D, n)`` by multiplications (cheaper to differentiate than prod)."""
    out = h[:, 0]
    for d in range(1, h.shape[1]):
        out = out * h[:, d]
    return out


def sum_to_zero_constants(
    xt: torch.Tensor, vars: torch.Tensor, b: torch.Tensor, log_gamma: torch.Tensor
) -> torch.Tensor:
    """c_kj = -(1 - m_kj) / m_kj with m_kj the training mean of s_kj: (K, D)."""
    m = sigmoid_ridges(xt, vars, b, log_gamma).mean(-1).clamp(EPS, 1 - EPS)
    return -(1 - m) / m


def basis(
    xt: torch.Tensor, vars: torch.Tensor, b: torch.Tensor, log_gamma: torch.Tensor, c: torch.Tensor
) -> torch.Tensor:
    """phi_k(x_i) with frozen constants ``c: (K, D)`` (from ``sum_to_zero_constants``): (n, K)."""
    valid = (vars < xt.shape[0] - 1).to(xt.dtype)[..., None]
    h = 1 + valid * (c - 1)[..., None] * sigmoid_ridges(xt, vars, b, log_gamma)
    return _product(h).T


def train_basis(
    xt: torch.Tensor, vars: torch.Tensor, b: torch.Tensor, log_gamma: torch.Tensor
) -> torch.Tensor:
    """phi on the training inputs with constants computed from them, h = 1 - s/m: (n, K)."""
    valid = (vars < xt.shape[0] - 1).to(xt.dtype)[..., None]
    s = sigmoid_ridges(xt, vars, b, log_gamma)
    h = 1 - valid * s / s.mean(-1, keepdim=True).clamp(EPS, 1 - EPS)
    return _product(h).T
