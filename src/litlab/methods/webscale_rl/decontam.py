"""Decontamination against evaluation sets (not in the released pipeline; ours): a training pair is
contaminated when it covers at least ``threshold`` of some evaluation item's word n-grams. Coverage of all
pairs at once is one sparse product, (train × vocab) · (vocab × eval)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy import sparse

from litlab.methods.webscale_rl.text import ngrams


def _incidence(texts: Sequence[str], n: int, vocab: dict[str, int], grow: bool) -> sparse.csr_matrix:
    """Binary (texts, vocab) matrix of the n-grams each text holds (new n-grams added if ``grow``)."""
    rows, cols = [], []
    for row, text in enumerate(texts):
        for gram in ngrams(text, n):
            col = vocab.setdefault(gram, len(vocab)) if grow else vocab.get(gram)
            if col is not None:
                rows.append(row)
                cols.append(col)
    data = np.ones(len(rows), dtype=np.float32)
    return sparse.csr_matrix((data, (rows, cols)), shape=(len(texts), max(len(vocab), 1)))


def eval_coverage(
    train: Sequence[str], evaluation: Sequence[str], n: int = 5
) -> tuple[np.ndarray, np.ndarray]:
    """Per training text: the largest share of one evaluation item's n-grams it contains (N,), and which
    evaluation item that is (N,; -1 when it shares none)."""
    vocab: dict[str, int] = {}
    e = _incidence(evaluation, n, vocab, grow=True)
    t = _incidence(train, n, vocab, grow=False)
    sizes = np.maximum(np.asarray(e.sum(1)).ravel(), 1.0)
    shared = (t @ e.T).tocsr().multiply(1.0 / sizes[None, :]).tocsr()
    if shared.shape[1] == 0 or shared.nnz == 0:
        return np.zeros(len(train)), np.full(len(train), -1)
    best = np.asarray(shared.max(1).todense()).ravel()
    which = np.where(best > 0, np.asarray(shared.argmax(1)).ravel(), -1)
    return best, which


def contaminated(
    train: Sequence[str], evaluation: Sequence[str], n: int = 5, threshold: float = 0.8
) -> np.ndarray:
    """Bool mask (N,): training texts that cover ≥ ``threshold`` of some evaluation item's n-grams."""
    if not len(train) or not len(evaluation):
        return np.zeros(len(train), dtype=bool)
    return eval_coverage(train, evaluation, n)[0] >= threshold
