"""Near-duplicate removal (not in the released pipeline; ours): MinHash of word-shingle sets with LSH
banding (``datasketch``), keeping the first of each group whose estimated Jaccard similarity ≥ threshold."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from litlab.core.errors import LitlabError
from litlab.methods.webscale_rl.text import ngrams


def _datasketch():  # noqa: ANN202 (an optional module)
    try:
        import datasketch
    except ImportError as error:
        raise LitlabError("webscale_rl dedup needs datasketch: pip install 'litlab[webscale_rl]'") from error
    return datasketch


def minhashes(texts: Sequence[str], num_perm: int = 128, shingle: int = 3, seed: int = 1) -> list:
    """One ``MinHash`` per text over its word ``shingle``-grams (all texts hashed in one bulk call)."""
    sets = [[g.encode() for g in sorted(ngrams(t, shingle))] for t in texts]
    return _datasketch().MinHash.bulk(sets, num_perm=num_perm, seed=seed)


def near_duplicates(
    texts: Sequence[str],
    threshold: float = 0.8,
    num_perm: int = 128,
    shingle: int = 3,
    seed: int = 1,
    recall_weight: float = 0.9,
) -> np.ndarray:
    """Bool mask (N,): True where a text is a near-duplicate of an earlier one (LSH candidates confirmed by
    the MinHash estimate of Jaccard similarity ≥ ``threshold``). ``recall_weight`` weighs missed pairs
    against spurious candidates when choosing the bands; 0.9 (datasketch: 0.5) misses a pair at Jaccard 0.93
    with probability 3e-5 instead of 1e-2, and spurious candidates are dropped by the confirmation."""
    weights = (1 - recall_weight, recall_weight)
    lsh = _datasketch().MinHashLSH(threshold=threshold, num_perm=num_perm, weights=weights)
    hashes = minhashes(texts, num_perm, shingle, seed)
    duplicate = np.zeros(len(texts), dtype=bool)
    for index, h in enumerate(hashes):
        if any(h.jaccard(hashes[int(j)]) >= threshold for j in lsh.query(h)):
            duplicate[index] = True
        else:
            lsh.insert(str(index), h)
    return duplicate
