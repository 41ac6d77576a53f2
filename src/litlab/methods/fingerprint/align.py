"""Hidden-dimension alignment of two models through their shared-token embedding rows (AWM's LAP step).

With the base model the wider one (d₁ ≥ d₂), S = cosine similarity between the d₁ columns of E₁ and the d₂
columns of E₂ over the shared tokens; a rectangular linear assignment on 1 − |S| maps each target dimension
j to a base dimension π(j), and s_j = sign(S_{π(j), j}) undoes a sign flip. This inverts residual-stream
permutations, sign flips and width pruning (which keeps a subset of the base's dimensions).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import torch
from scipy.optimize import linear_sum_assignment


@dataclass(frozen=True)
class Alignment:
    """Target dimension j reads base dimension ``index[j]`` times ``sign[j]`` (both ``(d₂,)``)."""

    index: torch.Tensor
    sign: torch.Tensor

    def apply(self, weight: torch.Tensor) -> torch.Tensor:
        """``(out, d₂)``: the base's ``(out, d₁)`` weight with its input columns aligned to the target's."""
        return weight[:, self.index] * self.sign.to(weight.dtype)

    @classmethod
    def identity(cls, width: int) -> Alignment:
        return cls(torch.arange(width), torch.ones(width))


def shared_rows(
    vocab_base: Mapping[str, int], vocab_target: Mapping[str, int]
) -> tuple[torch.Tensor, torch.Tensor]:
    """Row indices ``(n_shared,)`` into each embedding of the token strings both vocabularies hold (in the
    base's id order)."""
    common = sorted(set(vocab_base) & set(vocab_target), key=vocab_base.__getitem__)
    base = torch.tensor([vocab_base[t] for t in common], dtype=torch.long)
    target = torch.tensor([vocab_target[t] for t in common], dtype=torch.long)
    return base, target


def column_cosine(embed_base: torch.Tensor, embed_target: torch.Tensor) -> torch.Tensor:
    """``(d₁, d₂)``: cosine similarity between the columns of ``(n, d₁)`` and ``(n, d₂)`` row-aligned
    embeddings."""
    a = embed_base / embed_base.norm(dim=0, keepdim=True).clamp_min(1e-12)
    b = embed_target / embed_target.norm(dim=0, keepdim=True).clamp_min(1e-12)
    return a.T @ b


def align_hidden(
    embed_base: torch.Tensor, embed_target: torch.Tensor, *, assignment: bool = True, sign: bool = True
) -> Alignment:
    """The alignment of the target's d₂ hidden dimensions to the base's d₁ ≥ d₂ from shared-token rows.

    ``assignment=False`` (ablation) keeps the first d₂ base dimensions in order; ``sign=False`` (ablation)
    keeps every sign +1.
    """
    d_base, d_target = embed_base.shape[1], embed_target.shape[1]
    if d_base < d_target:
        raise ValueError(f"the base must be the wider model, got d_base={d_base} < d_target={d_target}")
    similarity = column_cosine(embed_base.double(), embed_target.double())
    if assignment:
        rows, cols = linear_sum_assignment(1.0 - similarity.abs().numpy())
        index = torch.from_numpy(rows[np.argsort(cols)].astype(np.int64))
    else:
        index = torch.arange(d_target)
    signs = similarity[index, torch.arange(d_target)].sign() if sign else torch.ones(d_target)
    return Alignment(index, torch.where(signs == 0, 1.0, signs).float())
