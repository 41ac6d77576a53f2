"""The selectors DATAMASK is compared with, all at the same budget k = round(r·N):

- ``greedy_select``: exact greedy on the same objective (DiSF-style): k picks, each the document that
  maximises J of the selection with it. Incremental: hᵢ = Σ_{j∈S}(eᵢ·eⱼ)² is kept for every candidate, so
  ‖Σ_{S∪i} eeᵀ‖²_F = ‖Σ_S eeᵀ‖²_F + 2hᵢ + ‖eᵢ‖⁴ costs O(1) per candidate and a pick costs O(N·d).
  With λ = 0 it is greedy diversity (DiSF's selection on the diversity term alone).
- ``topk_quality``, ``random_select``.
"""

from __future__ import annotations

import time

import torch

from litlab.methods.datamask.selector import Selection, budget


def greedy_select(
    quality: torch.Tensor, embeddings: torch.Tensor, ratio: float, lam: float, seed: int = 0
) -> Selection:
    """Exact greedy maximisation of λ·q̄ − (1 − λ)·D over selections growing to round(r·N); ties (e.g. the
    first pick when λ = 0) go to a seeded random order. Sums are kept in float64; the per-pick product
    runs in ``embeddings``' dtype. The loop over picks is the algorithm."""
    start = time.perf_counter()
    n, k = len(quality), budget(len(quality), ratio)
    order = torch.randperm(n, generator=torch.Generator().manual_seed(seed))
    emb, q = embeddings[order], quality[order].double()  # the O(N·d) product in the input dtype
    grow = (emb * emb).sum(1).double().square()  # 2·hᵢ + ‖eᵢ‖⁴, hᵢ = Σ_{j∈S}(eᵢ·eⱼ)²
    gain = lam * q  # −inf once taken
    chosen = torch.empty(k, dtype=torch.long)
    frob_sq, value = 0.0, torch.empty(n, dtype=torch.float64)
    for step in range(k):
        # argmax of λ·(Q + qᵢ) − (1 − λ)·√(F + 2hᵢ + ‖eᵢ‖⁴): Q and the 1/|S ∪ i| factor are common to all i
        torch.add(grow, frob_sq, out=value).sqrt_().mul_(lam - 1).add_(gain)
        pick = int(value.argmax())
        chosen[step] = pick
        frob_sq += grow[pick].item()
        grow.add_((emb @ emb[pick]).square_(), alpha=2)
        gain[pick] = -torch.inf
    return Selection(order[chosen], time.perf_counter() - start)


def topk_quality(quality: torch.Tensor, ratio: float) -> Selection:
    """The round(r·N) highest-quality documents (FineWeb-Edu/DCLM-style selection)."""
    start = time.perf_counter()
    indices = quality.topk(budget(len(quality), ratio)).indices
    return Selection(indices, time.perf_counter() - start)


def random_select(n_documents: int, ratio: float, seed: int = 0) -> Selection:
    """round(r·N) documents uniformly at random, seeded."""
    start = time.perf_counter()
    order = torch.randperm(n_documents, generator=torch.Generator().manual_seed(seed))
    return Selection(order[: budget(n_documents, ratio)], time.perf_counter() - start)
