"""A learnable Lie algebra g = k ⊕ p and the Cartan-decomposition penalties on its bases.

A Cartan decomposition satisfies [k, k] ⊂ k, [k, p] ⊂ p and [p, p] ⊂ k. Training uses the official
code's orthogonality form (a bracket that should lie in one part must be Frobenius-orthogonal to every
basis of the other part); evaluation also reports the stricter projection residual (the share of each
bracket outside the span of the part it should lie in).
"""

from __future__ import annotations

import torch
from torch import nn


def bracket(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """All pairwise commutators [A_i, B_j] = A_i B_j − B_j A_i of a (n, m, m), b (l, m, m): (n, l, m, m)."""
    ab = torch.einsum("iac,jcb->ijab", a, b)
    ba = torch.einsum("jac,icb->ijab", b, a)
    return ab - ba


def _pairs(brackets: torch.Tensor, distinct: bool) -> torch.Tensor:
    """Flatten (n, l, m, m) brackets to (pairs, m, m), keeping i < j when both come from one basis set."""
    if not distinct:
        return brackets.flatten(0, 1)
    i, j = torch.triu_indices(brackets.shape[0], brackets.shape[1], offset=1, device=brackets.device)
    return brackets[i, j]


def cartan_orthogonality(k: torch.Tensor, p: torch.Tensor) -> dict[str, torch.Tensor]:
    """Mean squared Frobenius products ⟨[K_i,K_j],P_l⟩² (i<j), ⟨[K_i,P_j],K_l⟩², ⟨[P_i,P_j],P_l⟩² (i<j).

    k: (n_k, m, m), p: (n_p, m, m). Each term is zero when the brackets of a Cartan pair avoid the
    other part; the three are the official code's L_Cartan terms (weight 1 each).
    """
    kk = _pairs(bracket(k, k), distinct=True)
    kp = _pairs(bracket(k, p), distinct=False)
    pp = _pairs(bracket(p, p), distinct=True)
    return {
        "kk": _mean_square(torch.einsum("sab,lab->sl", kk, p)),
        "kp": _mean_square(torch.einsum("sab,lab->sl", kp, k)),
        "pp": _mean_square(torch.einsum("sab,lab->sl", pp, p)),
    }


def _mean_square(products: torch.Tensor) -> torch.Tensor:
    """Mean of the squared products; 0 when there are none (one basis has no distinct pairs)."""
    return products.square().mean() if products.numel() else products.new_zeros(())


def span_residual(vectors: torch.Tensor, basis: torch.Tensor) -> torch.Tensor:
    """‖v − Proj_span(basis) v‖² / ‖v‖² summed over all v: vectors (s, m, m), basis (l, m, m), scalar."""
    q, _ = torch.linalg.qr(basis.flatten(1).T)  # (m², l) orthonormal basis of the span
    flat = vectors.flatten(1)
    outside = flat - (flat @ q) @ q.T
    return outside.square().sum() / flat.square().sum().clamp_min(1e-30)


def cartan_residuals(k: torch.Tensor, p: torch.Tensor) -> dict[str, torch.Tensor]:
    """Share of [k,k] outside span(k), of [k,p] outside span(p), of [p,p] outside span(k) (0 = exact)."""
    return {
        "kk": span_residual(_pairs(bracket(k, k), distinct=True), k),
        "kp": span_residual(_pairs(bracket(k, p), distinct=False), p),
        "pp": span_residual(_pairs(bracket(p, p), distinct=True), k),
    }


class LieBases(nn.Module):
    """Learnable unconstrained bases K_i (i < n_k) of k and P_j (j < n_p) of p in R^{m×m}.

    The Lie-algebra element of coefficients c_k (B, n_k), c_p (B, n_p) is X = Σ c_k,i K_i + Σ c_p,j P_j
    (B, m, m); bases start from N(0, init_std²) as in the official code.
    """

    def __init__(self, n_k: int = 5, n_p: int = 10, dim: int = 10, init_std: float = 0.1) -> None:
        super().__init__()
        self.k = nn.Parameter(init_std * torch.randn(n_k, dim, dim))
        self.p = nn.Parameter(init_std * torch.randn(n_p, dim, dim))

    def components(self, c_k: torch.Tensor, c_p: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(X_k, X_p), each (B, m, m): the k- and p-parts of X."""
        return torch.einsum("bi,imn->bmn", c_k, self.k), torch.einsum("bj,jmn->bmn", c_p, self.p)

    def forward(self, c_k: torch.Tensor, c_p: torch.Tensor) -> torch.Tensor:
        x_k, x_p = self.components(c_k, c_p)
        return x_k + x_p

    def nontriviality(self) -> torch.Tensor:
        """Σ_B 1/‖B‖_F over all bases: keeps the orthogonality penalties from collapsing the bases to 0."""
        norms = torch.cat([self.k, self.p]).flatten(1).norm(dim=1)
        return norms.reciprocal().sum()
