"""A learnable Lie algebra g = k ⊕ p and the Cartan-decomposition penalties on its bases.

A Cartan decomposition satisfies [k, k] ⊂ k, [k, p] ⊂ p and [p, p] ⊂ k. Two training forms: the official
code's orthogonality form (a bracket that should lie in one part must be Frobenius-orthogonal to every
basis of the other part), which k ⊕ p ≠ gl(m) lets the bases satisfy by shrinking, and the projection form
(the poster's L([k,k], k) + ...: each bracket's share outside the span it should lie in, normalised by the
bracket's own norm so that scale cannot cheat). Evaluation reports the projection residuals, how far the
brackets are from commuting, and the overlap of span(k) and span(p) (the cheats the residuals miss).
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


def _mean_shares_outside(vectors: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """Mean over v of ‖v − q qᵀ v‖² / ‖v‖²: vectors (s, m, m), q (m², l) orthonormal; 0 if s = 0."""
    if not len(vectors):
        return vectors.new_zeros(())
    flat = vectors.flatten(1)
    outside = flat - (flat @ q) @ q.T
    return (outside.square().sum(1) / flat.square().sum(1).clamp_min(1e-30)).mean()


def cartan_projection(k: torch.Tensor, p: torch.Tensor) -> dict[str, torch.Tensor]:
    """The projection form of L_Cartan: mean share of each bracket outside its span, plus k ⊥ p.

    Each bracket [A, B] is scored by ‖[A,B] − Proj [A,B]‖² / ‖[A,B]‖², so rescaling the bases changes
    nothing; in [0, 1] per term, 0 exactly on a Cartan pair. A term with no pairs (one basis) is 0.
    ``perp`` (mean squared cosine between orthonormal bases of span(k) and span(p)) keeps g = k ⊕ p
    direct: without it the three inclusions are met by letting span(p) contain span(k).
    """
    qk, _ = torch.linalg.qr(k.flatten(1).T)
    qp, _ = torch.linalg.qr(p.flatten(1).T)
    return {
        "kk": _mean_shares_outside(_pairs(bracket(k, k), distinct=True), qk),
        "kp": _mean_shares_outside(_pairs(bracket(k, p), distinct=False), qp),
        "pp": _mean_shares_outside(_pairs(bracket(p, p), distinct=True), qk),
        "perp": (qk.T @ qp).square().sum() / min(len(k), len(p)),
    }


def commutator_ratio(k: torch.Tensor, p: torch.Tensor) -> dict[str, torch.Tensor]:
    """‖[A,B]‖² / (‖A‖²‖B‖²) averaged over the pairs of [k,p] and [p,p]: near 0 = (almost) commuting bases.

    All three residuals are met trivially by commuting bases, so a recovered Cartan pair needs this > 0.
    """
    ratios = {}
    for name, a, b, distinct in (("kp", k, p, False), ("pp", p, p, True)):
        sq = bracket(a, b).square().sum((2, 3)) / (
            a.square().sum((1, 2))[:, None] * b.square().sum((1, 2))[None, :]
        )
        pairs = _pairs(sq[..., None, None], distinct)
        ratios[name] = pairs.mean() if pairs.numel() else sq.new_zeros(())
    return ratios


def span_overlap(k: torch.Tensor, p: torch.Tensor) -> torch.Tensor:
    """Largest squared cosine between span(k) and span(p) (0 = orthogonal, 1 = they share a direction)."""
    qk, _ = torch.linalg.qr(k.flatten(1).T)
    qp, _ = torch.linalg.qr(p.flatten(1).T)
    return torch.linalg.matrix_norm(qk.T @ qp, ord=2).square()


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
