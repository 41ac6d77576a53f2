"""The AWM score of two models: align hidden dimensions, compare aligned W_q/W_k Gram matrices layer by
layer with unbiased CKA, match layers when depths differ, average.

score = mean over matched layer pairs (i, j) of ½·[CKA_u(K_q,i, L_q,j) + CKA_u(K_k,i, L_k,j)], with
K = W̃ᵀW̃ of the base's aligned weight and L = WᵀW of the target's; Z = |score − 0.00375| / 0.0028, the
constants hard-coded in the official code (the mean and spread of its unrelated pairs).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch
from scipy.optimize import linear_sum_assignment

from litlab.core.errors import LitlabError
from litlab.methods.fingerprint.align import Alignment, align_hidden, shared_rows
from litlab.methods.fingerprint.cka import gram, u_centre
from litlab.methods.fingerprint.weights import WeightSource, as_source

Z_CENTER, Z_SCALE = 0.00375, 0.0028


def z_score(score: float) -> float:
    """AWM's Z-score of a similarity against its unrelated-pair reference (official constants)."""
    return abs(score - Z_CENTER) / Z_SCALE


@dataclass(frozen=True)
class Options:
    """The mechanism's switches; each False is one ablation of the paper's pipeline."""

    unbiased: bool = True
    assignment: bool = True
    sign: bool = True
    layer_matching: bool = True


@dataclass
class FingerprintResult:
    """One comparison: the score, its Z, and what produced it."""

    score: float
    z: float
    q: float
    k: float
    layer_pairs: list[tuple[int, int]]
    alignment: Alignment
    shared_tokens: int | None
    base_is_first: bool
    seconds: float
    per_layer: torch.Tensor = field(repr=False)  # (n_pairs, 2): CKA of W_q and W_k per matched pair


def _biased_centre(matrix: torch.Tensor) -> torch.Tensor:
    matrix = matrix - matrix.mean(0, keepdim=True)
    return matrix - matrix.mean(1, keepdim=True)


def _normalised(weight: torch.Tensor, centre: Callable[[torch.Tensor], torch.Tensor]) -> torch.Tensor:
    """The centred Gram of ``weight`` scaled to unit Frobenius norm (so CKA is a plain inner product)."""
    centred = centre(gram(weight))
    return centred / centred.norm().clamp_min(torch.finfo(centred.dtype).tiny)


def hidden_alignment(
    base: WeightSource, target: WeightSource, options: Options | None = None
) -> tuple[Alignment, int | None]:
    """The base→target hidden alignment from shared-token rows, and the number of shared tokens (None when
    a vocabulary is missing, in which case the widths must be equal and dimensions are compared in place)."""
    options = options or Options()
    vocab_base, vocab_target = base.vocab(), target.vocab()
    if vocab_base is None or vocab_target is None:
        if base.hidden_size != target.hidden_size:
            raise LitlabError(
                f"{base.name} / {target.name}: without a vocabulary (tokenizer.json) the hidden sizes must "
                f"match, got {base.hidden_size} and {target.hidden_size}"
            )
        return Alignment.identity(target.hidden_size), None
    rows_base, rows_target = shared_rows(vocab_base, vocab_target)
    if len(rows_base) < 2:
        raise LitlabError(f"{base.name} / {target.name}: the vocabularies share {len(rows_base)} tokens")
    embed_base, embed_target = base.embed()[rows_base], target.embed()[rows_target]
    alignment = align_hidden(embed_base, embed_target, assignment=options.assignment, sign=options.sign)
    return alignment, len(rows_base)


def awm_score(
    first: WeightSource | str | os.PathLike,
    second: WeightSource | str | os.PathLike,
    options: Options | None = None,
    dtype: torch.dtype = torch.float64,
) -> FingerprintResult:
    """AWM similarity of two models (paths to checkpoint folders or ``WeightSource``s), symmetric in its
    arguments: the wider model is the base. Reads one layer of each model at a time."""
    start = time.perf_counter()
    options = options or Options()
    first, second = as_source(first), as_source(second)
    base_is_first = first.hidden_size >= second.hidden_size
    base, target = (first, second) if base_is_first else (second, first)
    alignment, n_shared = hidden_alignment(base, target, options)
    centre = u_centre if options.unbiased else _biased_centre

    def base_layer(i: int) -> tuple[torch.Tensor, torch.Tensor]:
        q, k = base.qk(i)
        return tuple(_normalised(alignment.apply(w.to(dtype)), centre) for w in (q, k))

    def target_layer(j: int) -> tuple[torch.Tensor, torch.Tensor]:
        return tuple(_normalised(w.to(dtype), centre) for w in target.qk(j))

    n_base, n_target = base.num_layers, target.num_layers
    if n_base == n_target or not options.layer_matching:
        pairs = [(i, i) for i in range(min(n_base, n_target))]
        per_layer = torch.stack(
            [torch.stack([(a * b).sum() for a, b in zip(base_layer(i), target_layer(j))]) for i, j in pairs]
        )
    else:
        # Depths differ: keep the target's normalised Grams, stream the base, assign layers by mean CKA.
        targets = [target_layer(j) for j in range(n_target)]
        stacked = [torch.stack([t[part] for t in targets]) for part in (0, 1)]
        matrix = torch.stack(
            [
                torch.stack([(stacked[part] * grams[part]).sum((1, 2)) for part in (0, 1)], -1)
                for grams in map(base_layer, range(n_base))
            ]
        )  # (n_base, n_target, 2)
        rows, cols = linear_sum_assignment(matrix.mean(-1).numpy(), maximize=True)
        order = np.argsort(rows)
        pairs = [(int(rows[o]), int(cols[o])) for o in order]
        per_layer = torch.stack([matrix[i, j] for i, j in pairs])
    q, k = per_layer.mean(0).tolist()
    score = (q + k) / 2
    if not base_is_first:
        pairs = [(j, i) for i, j in pairs]
    return FingerprintResult(
        score=score,
        z=z_score(score),
        q=q,
        k=k,
        layer_pairs=pairs,
        alignment=alignment,
        shared_tokens=n_shared,
        base_is_first=base_is_first,
        seconds=time.perf_counter() - start,
        per_layer=per_layer,
    )
