"""SparseD's pattern selection: tile importance, head-specific top-k key blocks, isolated selection of the
generation keys; and the fixed sink + window pattern it is compared with.

Shapes: ``query, key (B, H, L, d)``; patterns are bool ``(B, H, n, n)`` block tables (n = ⌈L / b⌉),
True = query block i attends to key block j (the format of ``litlab.lm.BlockMask``).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor
from torch.nn import functional as F


def tile_importance(
    query: Tensor, key: Tensor, block: int, scale: float | None = None, chunk: int = 8
) -> Tensor:
    """``(B, H, n_q, n_kv)``: the mean attention probability of each b×b tile of P = softmax(Q Kᵀ·scale),
    computed ``chunk`` query blocks at a time (never the whole L×L matrix)."""
    batch, heads, q_len, dim = query.shape
    kv_len = key.shape[2]
    scale = dim**-0.5 if scale is None else scale
    n_q, n_kv = math.ceil(q_len / block), math.ceil(kv_len / block)
    counts_kv = torch.full((n_kv,), float(block), device=query.device)
    counts_kv[-1] = kv_len - (n_kv - 1) * block
    out = []
    for start in range(0, n_q, chunk):
        rows = query[:, :, start * block : min((start + chunk) * block, q_len)]
        probs = torch.softmax((rows @ key.transpose(-1, -2)).float() * scale, -1)
        n_rows = rows.shape[2]
        n_blocks = math.ceil(n_rows / block)
        probs = F.pad(probs, (0, n_kv * block - kv_len, 0, n_blocks * block - n_rows))
        sums = probs.view(batch, heads, n_blocks, block, n_kv, block).sum((3, 5))
        counts_q = torch.full((n_blocks,), float(block), device=query.device)
        counts_q[-1] = n_rows - (n_blocks - 1) * block
        out.append(sums / (counts_q[:, None] * counts_kv))
    return torch.cat(out, 2)


def keep_count(n_blocks: int, rho: float) -> int:
    """SparseD's budget: ⌊n·ρ⌋ + 1 blocks, at most n."""
    return min(n_blocks, math.floor(n_blocks * rho) + 1)


def top_blocks(importance: Tensor, keep: int) -> Tensor:
    """bool like ``importance (..., n)``: the ``keep`` largest entries of each row (−inf entries never,
    unless a row has fewer finite ones than ``keep``)."""
    mask = torch.zeros_like(importance, dtype=torch.bool)
    if keep <= 0:
        return mask
    chosen = importance.topk(keep, -1).indices
    return mask.scatter_(-1, chosen, True) & (importance > -torch.inf)


def generation_start_block(length: int, gen_length: int, block: int) -> int:
    """The first key block whose remaining length (``length − j·b``) is at most ``gen_length``: the
    generation keys of isolated selection are the blocks from here on."""
    return math.ceil((length - gen_length) / block)


def row_budget(length: int, gen_length: int, block: int, rho: float, isolated: bool = True) -> int:
    """Key blocks SparseD keeps per (head, query block): ⌊n·ρ⌋ + 1, plus ⌊n_gen·ρ⌋ + 1 generation blocks
    with isolated selection (the budget a fixed pattern gets for a fair comparison)."""
    n_kv = math.ceil(length / block)
    first_gen = generation_start_block(length, gen_length, block) if isolated and gen_length else n_kv
    if first_gen >= n_kv:
        return keep_count(n_kv, rho)
    return min(keep_count(n_kv, rho), first_gen) + keep_count(n_kv - first_gen, rho)


def select_pattern(
    query: Tensor,
    key: Tensor,
    block: int,
    rho: float,
    gen_length: int = 0,
    isolated: bool = True,
    head_average: bool = False,
    scale: float | None = None,
) -> Tensor:
    """SparseD's selection from one step's queries and keys → bool ``(B, H, n, n)``.

    Each (head, query block) keeps its top ⌊n·ρ⌋ + 1 key blocks by tile importance. With ``isolated`` the
    generation key blocks (the last ``gen_length`` positions, whole blocks) are blanked there, their own
    softmax (over generation keys only) ranks them, and the top ⌊n_gen·ρ⌋ + 1 of them are added.
    ``head_average`` (ablation) ranks by the importance averaged over heads: one pattern for all heads.
    """
    length = key.shape[2]
    n_kv = math.ceil(length / block)
    first_gen = generation_start_block(length, gen_length, block) if isolated and gen_length else n_kv

    def rank(importance: Tensor, keep: int) -> Tensor:
        if head_average:
            importance = importance.mean(1, keepdim=True)
        return top_blocks(importance, keep).expand(-1, query.shape[1], -1, -1)

    importance = tile_importance(query, key, block, scale)
    if first_gen >= n_kv:
        return rank(importance, keep_count(n_kv, rho))
    blanked = importance.clone()
    blanked[..., first_gen:] = -torch.inf
    pattern = rank(blanked, min(keep_count(n_kv, rho), first_gen))
    gen_importance = tile_importance(query, key[:, :, first_gen * block :], block, scale)
    gen_pattern = rank(gen_importance, keep_count(n_kv - first_gen, rho))
    pattern = pattern.clone()
    pattern[..., first_gen:] |= gen_pattern
    return pattern


def sink_window_pattern(n_blocks: int, keep: int, batch: int = 1, heads: int = 1) -> Tensor:
    """StreamingLLM-style fixed pattern for bidirectional attention: key block 0 (the sink) and the
    ``keep − 1`` blocks nearest each query block (ties to the earlier block) → bool ``(B, H, n, n)``."""
    index = torch.arange(n_blocks)
    distance = (index[:, None] - index[None]).abs().float() + 0.5 * (index[None] > index[:, None])
    distance[:, 0] = -1.0  # the sink always first
    return top_blocks(-distance, keep).expand(batch, heads, n_blocks, n_blocks)


def pattern_density(pattern: Tensor) -> float:
    """Kept tiles / all tiles of a block table: the share of attention FLOPs a sparse step computes."""
    return pattern.float().mean().item()
