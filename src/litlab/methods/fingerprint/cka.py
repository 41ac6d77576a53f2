"""Centred kernel alignment between Gram matrices: the unbiased form AWM scores with and the biased one.

For Gram matrices ``K, L: (n, n)`` (n samples, here the hidden dimensions), the unbiased HSIC estimator of
Song et al. (2012) is::

    HSIC_u = [tr(K̃L̃) + 1ᵀK̃1·1ᵀL̃1 / ((n−1)(n−2)) − 2/(n−2)·1ᵀK̃L̃1] / (n(n−3)),   K̃ = K with a zero diagonal

and CKA_u = HSIC_u(K, L) / sqrt(HSIC_u(K, K) HSIC_u(L, L)). AWM's code computes it through the equivalent
U-centring (``u_centre``), an O(n²) form; ``hsic_unbiased`` is the closed form the tests compare it with.
"""

from __future__ import annotations

import torch


def u_centre(gram: torch.Tensor) -> torch.Tensor:
    """``(n, n)``: the U-centred Gram matrix, K̃_ij − r_i/(n−2) − r_j/(n−2) + S/((n−1)(n−2)) off the diagonal
    (r the row sums and S the total of K̃), zero on it; ⟨U(K), U(L)⟩ = n(n−3)·HSIC_u(K, L)."""
    n = gram.shape[0]
    if n < 4:
        raise ValueError(f"unbiased CKA needs at least 4 samples, got {n}")
    k = gram.clone()
    k.fill_diagonal_(0)
    rows = k.sum(1)
    total = rows.sum()
    k = k - rows[:, None] / (n - 2) - rows[None, :] / (n - 2) + total / ((n - 1) * (n - 2))
    k.fill_diagonal_(0)
    return k


def hsic_unbiased(gram_x: torch.Tensor, gram_y: torch.Tensor) -> torch.Tensor:
    """The closed-form unbiased HSIC estimator of Song et al. (2012) (the reference for ``u_centre``)."""
    n = gram_x.shape[0]
    k, m = gram_x.clone(), gram_y.clone()
    k.fill_diagonal_(0)
    m.fill_diagonal_(0)
    ones = torch.ones(n, dtype=k.dtype, device=k.device)
    trace = (k * m.T).sum()
    middle = (ones @ k @ ones) * (ones @ m @ ones) / ((n - 1) * (n - 2))
    cross = 2 / (n - 2) * (ones @ k @ m @ ones)
    return (trace + middle - cross) / (n * (n - 3))


def _cosine(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return (a * b).sum() / (a.norm() * b.norm()).clamp_min(torch.finfo(a.dtype).tiny)


def cka_unbiased(gram_x: torch.Tensor, gram_y: torch.Tensor) -> torch.Tensor:
    """Unbiased (debiased) CKA of two ``(n, n)`` Gram matrices: ≈ 0 for independent features, 1 for equal
    Grams up to scale."""
    return _cosine(u_centre(gram_x), u_centre(gram_y))


def cka_biased(gram_x: torch.Tensor, gram_y: torch.Tensor) -> torch.Tensor:
    """The usual (biased) CKA, ⟨HKH, HLH⟩/(‖HKH‖‖HLH‖) with H the centring matrix (the ablation)."""

    def centre(gram: torch.Tensor) -> torch.Tensor:
        gram = gram - gram.mean(0, keepdim=True)
        return gram - gram.mean(1, keepdim=True)

    return _cosine(centre(gram_x), centre(gram_y))


def gram(weight: torch.Tensor) -> torch.Tensor:
    """``(d, d)``: WᵀW of a ``(out, d)`` weight — the hidden dimensions are the samples, the output rows the
    features, so any orthogonal map or scale on the output side leaves the score unchanged."""
    return weight.T @ weight
