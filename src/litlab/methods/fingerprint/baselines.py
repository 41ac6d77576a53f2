"""Baselines on checkpoint folders: PCS, the trivial one (the cosine similarity of the two models' flattened
parameters, defined only when every tensor name and shape agrees), and HuRef-style invariants."""

from __future__ import annotations

import math
import os

import torch


def pcs(first: str | os.PathLike, second: str | os.PathLike) -> float:
    """Cosine of the concatenated parameter vectors of two checkpoint folders, tensor by tensor (streamed);
    NaN when their tensor names or shapes differ (PCS cannot compare them)."""
    from litlab.lm.checkpoints import CheckpointReader

    a, b = CheckpointReader(first, dtype="float64"), CheckpointReader(second, dtype="float64")
    names = sorted(a.names())
    if names != sorted(b.names()):
        return math.nan
    dot = norm_a = norm_b = torch.zeros((), dtype=torch.float64)
    for name in names:
        x, y = a.read([name])[name], b.read([name])[name]
        if x.shape != y.shape:
            return math.nan
        dot, norm_a, norm_b = dot + (x * y).sum(), norm_a + (x * x).sum(), norm_b + (y * y).sum()
    return float(dot / (norm_a.sqrt() * norm_b.sqrt()))


def _standardised(matrix: torch.Tensor) -> torch.Tensor:
    """Rows z-scored, then flattened (HuRef compares invariants after standardising each row)."""
    matrix = (matrix - matrix.mean(1, keepdim=True)) / matrix.std(1, keepdim=True).clamp_min(1e-12)
    return matrix.flatten()


def huref_invariants(
    first: str | os.PathLike, second: str | os.PathLike, max_tokens: int = 4096, layers: int = 2
) -> float:
    """HuRef-style invariant similarity (a reconstruction): for the last ``layers`` layers of each model,
    X W_qᵀW_k Xᵀ, X W_vᵀW_oᵀ Xᵀ and X W_upᵀW_downᵀ Xᵀ over the embeddings X of up to ``max_tokens`` shared
    tokens (lowest base ids first), rows standardised; the mean cosine of the pairs. Invariant to residual
    permutations (X and W move together) and to Q/K scaling; needs shared token strings, not equal widths.
    NaN without a vocabulary or with grouped keys of different head counts."""
    from litlab.lm.checkpoints import CheckpointReader
    from litlab.methods.fingerprint.align import shared_rows
    from litlab.methods.fingerprint.weights import read_vocab

    vocab_a, vocab_b = read_vocab(first), read_vocab(second)
    if vocab_a is None or vocab_b is None:
        return math.nan
    rows_a, rows_b = (rows[:max_tokens] for rows in shared_rows(vocab_a, vocab_b))
    readers = [CheckpointReader(first, dtype="float64"), CheckpointReader(second, dtype="float64")]
    embeds = [r.model_weights(keys=("embed",))["embed"][rows] for r, rows in zip(readers, (rows_a, rows_b))]
    cosines = []
    for offset in range(1, layers + 1):
        invariants = []
        for reader, x in zip(readers, embeds):
            w = reader.layer(reader.num_layers - offset, keys=("q", "k", "v", "o", "up", "down"))
            if w["q"].shape[0] != w["k"].shape[0]:
                return math.nan
            invariants.append(
                [
                    (x @ w["q"].T) @ (w["k"] @ x.T),
                    (x @ w["v"].T) @ (w["o"].T @ x.T),
                    (x @ w["up"].T) @ (w["down"].T @ x.T),
                ]
            )
        for m_a, m_b in zip(*invariants):
            a, b = _standardised(m_a), _standardised(m_b)
            cosines.append(float((a @ b) / (a.norm() * b.norm())))
    return sum(cosines) / len(cosines)
