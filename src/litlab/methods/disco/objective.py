"""The collective coverage objective and its exact maximisers (plain torch).

A query is a bag of unit token vectors Q (m, d); a document c a bag X_c. With the MaxSim matrix
``rows[c, q] = max_{x ∈ X_c} qᵀx``, the coverage of a set S is

    F(S, Q) = Σ_q max(START, max_{c ∈ S} rows[c, q]),      START = −2,

the paper's objective (Σ_q of the best token of the union of S) with the official code's start state:
F(∅) = −2m, so the first gain is MaxSim + 2m and round 1 is plain MaxSim. Because every qᵀx ≥ −1 > START,
F − F(∅) is a facility-location function: monotone and submodular, so greedy reaches (1 − 1/e) of the
optimum. The marginal gain is F(c | S) = Σ_q [rows[c, q] − F(S, q)]₊.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from itertools import combinations

import torch

from litlab.datamodules.retrieval import ragged_rows

START = -2.0

# MaxSim rows of a subset of documents: (doc ids (n,)) -> (n, m).
RowFn = Callable[[torch.Tensor], torch.Tensor]


def maxsim_rows(
    doc_vectors: torch.Tensor,
    doc_offsets: torch.Tensor,
    queries: torch.Tensor,
    docs: torch.Tensor | None = None,
    block_tokens: int = 1 << 19,
) -> torch.Tensor:
    """``rows[c, q] = max_{x ∈ X_c} qᵀx`` for ``docs`` (default all), computed in token blocks.

    doc_vectors: (M, d) unit rows, document c at ``doc_offsets[c]:doc_offsets[c+1]``; queries: (m, d).
    Returns (n_docs, m) float32.
    """
    queries = queries.to(doc_vectors.dtype)
    if docs is not None:
        rows, slot = ragged_rows(doc_offsets, docs)
        lengths = doc_offsets[docs + 1] - doc_offsets[docs]
        scores = (doc_vectors[rows] @ queries.T).float()
        return torch.segment_reduce(scores, "max", lengths=lengths, axis=0)
    lengths = doc_offsets[1:] - doc_offsets[:-1]
    out = []
    first = 0
    while first < len(lengths):
        # Whole documents per block, about block_tokens tokens each.
        last = int(torch.searchsorted(doc_offsets, doc_offsets[first] + block_tokens, right=True)) - 1
        last = min(max(last, first + 1), len(lengths))
        block = doc_vectors[doc_offsets[first] : doc_offsets[last]]
        scores = (block @ queries.T).float()
        out.append(torch.segment_reduce(scores, "max", lengths=lengths[first:last], axis=0))
        first = last
    return torch.cat(out)


def coverage(rows: torch.Tensor) -> float:
    """F(S) = Σ_q max(START, max_c rows[c, q]) for the MaxSim rows (|S|, m) of a set S."""
    if len(rows) == 0:
        return START * rows.shape[-1]
    return float(rows.max(0).values.clamp_min(START).sum())


def gains(rows: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
    """Marginal gains Σ_q [rows[c, q] − state[q]]₊ of each row (n, m) given the coverage state (m,)."""
    return (rows - state).clamp_min(0).sum(-1)


def greedy(rows: torch.Tensor, k: int) -> list[int]:
    """Exact greedy: k rounds, each evaluating the gain of every document (rows: (N, m))."""
    state = torch.full((rows.shape[1],), START)
    taken = torch.zeros(len(rows), dtype=torch.bool)
    selected = []
    for _ in range(min(k, len(rows))):
        g = gains(rows, state).masked_fill(taken, -math.inf)
        best = int(g.argmax())
        selected.append(best)
        taken[best] = True
        state = torch.maximum(state, rows[best])
    return selected


def lazy_greedy(rows: torch.Tensor, k: int, batch: int = 8) -> list[int]:
    """Lazy (Minoux) greedy; same picks as :func:`greedy` up to exact ties.

    Stale gains are upper bounds (submodularity): each pick re-evaluates the documents of largest bound,
    ``batch`` at first and twice as many each time, until the largest bound is a fresh gain.
    """
    state = torch.full((rows.shape[1],), START)
    bound = gains(rows, state)
    fresh_at = torch.full((len(rows),), -1)
    taken = torch.zeros(len(rows), dtype=torch.bool)
    selected: list[int] = []
    for pick in range(min(k, len(rows))):
        size = batch
        while True:
            best = int(bound.argmax())
            if fresh_at[best] == pick:
                break
            top = bound.topk(min(size, len(rows))).indices
            stale = top[(fresh_at[top] != pick) & ~taken[top]]
            bound[stale] = gains(rows[stale], state)
            fresh_at[stale] = pick
            size *= 2
        selected.append(best)
        taken[best] = True
        bound[best] = -math.inf
        state = torch.maximum(state, rows[best])
    return selected


def stochastic_greedy(
    row_fn: RowFn, n_docs: int, m: int, k: int, epsilon: float = 0.1, seed: int = 0
) -> list[int]:
    """Stochastic greedy (Mirzasoleiman et al. 2015): each round, the best of a random sample of
    ⌈(N/k)·ln(1/ε)⌉ unselected documents; MaxSim rows are computed only for sampled documents.
    """
    gen = torch.Generator().manual_seed(seed)
    size = min(n_docs, math.ceil(n_docs / k * math.log(1 / epsilon)))
    state = torch.full((m,), START)
    taken = torch.zeros(n_docs, dtype=torch.bool)
    selected = []
    for _ in range(min(k, n_docs)):
        free = (~taken).nonzero().squeeze(1)
        sample = free[torch.randperm(len(free), generator=gen)[:size]]
        rows = row_fn(sample)
        best = int(gains(rows, state).argmax())
        selected.append(int(sample[best]))
        taken[sample[best]] = True
        state = torch.maximum(state, rows[best])
    return selected


def top_k_maxsim(rows: torch.Tensor, k: int) -> list[int]:
    """Plain ColBERT ranking: the k documents with the largest MaxSim Σ_q rows[c, q]."""
    return rows.sum(1).topk(min(k, len(rows))).indices.tolist()


def brute_force_best(rows: torch.Tensor, k: int) -> tuple[list[int], float]:
    """The k-subset of maximal coverage by enumeration (tiny instances only) and its coverage."""
    best, value = [], -math.inf
    for subset in combinations(range(len(rows)), k):
        f = coverage(rows[list(subset)])
        if f > value:
            best, value = list(subset), f
    return best, value


def jaccard(a: Sequence[int], b: Sequence[int]) -> float:
    """|A ∩ B| / |A ∪ B| of two selections."""
    a, b = set(a), set(b)
    return len(a & b) / max(1, len(a | b))


def average_precision(selected: Sequence[int], gold: Sequence[int]) -> float:
    """AP of the selection order against the gold set (mean precision at each gold hit, over |gold|)."""
    gold = set(gold)
    hits, total = 0, 0.0
    for rank, doc in enumerate(selected, start=1):
        if doc in gold:
            hits += 1
            total += hits / rank
    return total / max(1, len(gold))
