"""SparseD's selection against brute force: tile importance = pooled full softmax, top-k per (head, q-block),
isolated selection of the generation keys, the head-averaged ablation and the sink + window pattern."""

from __future__ import annotations

import math

import torch
from torch.nn import functional as F

from litlab.methods.sparsed.selection import (
    generation_start_block,
    keep_count,
    row_budget,
    select_pattern,
    sink_window_pattern,
    tile_importance,
)


def _qk(length: int, seed: int, heads: int = 3, dim: int = 8) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(2, heads, length, dim, generator=gen), torch.randn(
        2, heads, length, dim, generator=gen
    )


def _pooled(probs: torch.Tensor, block: int) -> torch.Tensor:
    """Mean of each block×block tile by avg-pooling (ceil mode counts only real entries)."""
    batch, heads, rows, cols = probs.shape
    pooled = F.avg_pool2d(probs.reshape(batch * heads, 1, rows, cols), block, ceil_mode=True)
    return pooled.view(batch, heads, math.ceil(rows / block), math.ceil(cols / block))


def test_tile_importance_is_the_pooled_full_softmax() -> None:
    for length, block in [(64, 16), (50, 16)]:
        q, k = _qk(length, seed=length)
        probs = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(8), -1)
        got = tile_importance(q, k, block, chunk=2)
        torch.testing.assert_close(got, _pooled(probs, block), atol=1e-6, rtol=0)


def test_plain_selection_keeps_the_top_blocks_of_each_head_and_query_block() -> None:
    q, k = _qk(96, seed=1)
    pattern = select_pattern(q, k, 16, rho=0.3, isolated=False)
    importance = tile_importance(q, k, 16)
    keep = keep_count(6, 0.3)
    assert keep == 2 and (pattern.sum(-1) == keep).all()
    threshold = importance.topk(keep, -1).values[..., -1:]
    assert (importance[pattern] >= threshold.expand_as(importance)[pattern]).all()
    assert not torch.equal(pattern[:, 0], pattern[:, 1])  # heads choose differently


def test_isolated_selection_adds_the_generation_blocks_ranked_by_their_own_softmax() -> None:
    length, gen, block = 128, 32, 16
    q, k = _qk(length, seed=2)
    pattern = select_pattern(q, k, block, rho=0.3, gen_length=gen, isolated=True)
    first = generation_start_block(length, gen, block)
    assert first == 6
    prompt_part, gen_part = pattern[..., :first], pattern[..., first:]
    assert (prompt_part.sum(-1) == keep_count(8, 0.3)).all()
    assert (gen_part.sum(-1) == keep_count(2, 0.3)).all()
    assert (pattern.sum(-1) == row_budget(length, gen, block, 0.3)).all()
    gen_probs = torch.softmax(q @ k[:, :, first * block :].transpose(-1, -2) / math.sqrt(8), -1)
    gen_importance = _pooled(gen_probs, block)
    assert torch.equal(gen_part, gen_importance == gen_importance.amax(-1, keepdim=True))
    prompt_importance = tile_importance(q, k, block)[..., :first]
    best = prompt_importance.topk(keep_count(8, 0.3), -1).indices
    assert torch.equal(prompt_part, torch.zeros_like(prompt_part).scatter_(-1, best, True))


def test_generation_region_smaller_than_a_block_has_no_isolated_keys() -> None:
    q, k = _qk(64, seed=3)
    assert generation_start_block(64, 8, 16) == 4
    torch.testing.assert_close(
        select_pattern(q, k, 16, 0.3, gen_length=8).float(),
        select_pattern(q, k, 16, 0.3, isolated=False).float(),
    )


def test_head_average_gives_every_head_the_pattern_of_the_mean_importance() -> None:
    q, k = _qk(96, seed=4)
    pattern = select_pattern(q, k, 16, rho=0.3, isolated=False, head_average=True)
    mean = tile_importance(q, k, 16).mean(1, keepdim=True)
    best = mean.topk(keep_count(6, 0.3), -1).indices
    expected = torch.zeros_like(mean, dtype=torch.bool).scatter_(-1, best, True)
    assert torch.equal(pattern, expected.expand_as(pattern))


def test_sink_window_keeps_the_sink_and_the_nearest_blocks() -> None:
    pattern = sink_window_pattern(6, keep=3)[0, 0]
    assert pattern.sum(-1).tolist() == [3] * 6
    assert pattern[:, 0].all() and pattern.diagonal().all()
    assert pattern[4].tolist() == [True, False, False, True, True, False]
