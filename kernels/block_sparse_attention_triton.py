"""Triton block-sparse attention (forward): one program per (batch·head, query block) streams only the key
blocks its row of the table keeps, with the online softmax of FlashAttention.

Full passes only (``Lq == Lk``); the block size and head dimension must be powers of two ≥ 16 (``tl.dot``).
Runs under ``TRITON_INTERPRET=1`` on CPU tensors, which is how the tests check it against
``litlab.kernels.block_sparse_attention.dense_block_attention``. Import this module only where triton is
installed.
"""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl
from torch import Tensor

from litlab.kernels.block_sparse_attention import block_indices


@triton.jit
def _block_sparse_kernel(
    q_ptr,
    k_ptr,
    v_ptr,
    out_ptr,
    idx_ptr,
    count_ptr,
    length,
    n_q,
    width,
    scale,
    BLOCK: tl.constexpr,
    DIM: tl.constexpr,
):
    """out[bh, rows of q-block i] = softmax(q kᵀ · scale) v over the kept key blocks idx[bh, i, :count]."""
    q_block = tl.program_id(0)
    bh = tl.program_id(1).to(tl.int64)
    rows = q_block * BLOCK + tl.arange(0, BLOCK)
    dims = tl.arange(0, DIM)
    base = bh * length * DIM
    q = tl.load(q_ptr + base + rows[:, None] * DIM + dims[None, :], mask=rows[:, None] < length, other=0.0)
    row_max = tl.full((BLOCK,), float("-inf"), tl.float32)
    row_sum = tl.zeros((BLOCK,), tl.float32)
    acc = tl.zeros((BLOCK, DIM), tl.float32)
    table = (bh * n_q + q_block) * width
    count = tl.load(count_ptr + bh * n_q + q_block)
    for j in range(0, count):
        kv_block = tl.load(idx_ptr + table + j)
        cols = kv_block * BLOCK + tl.arange(0, BLOCK)
        inside = cols < length
        k = tl.load(k_ptr + base + cols[:, None] * DIM + dims[None, :], mask=inside[:, None], other=0.0)
        v = tl.load(v_ptr + base + cols[:, None] * DIM + dims[None, :], mask=inside[:, None], other=0.0)
        scores = tl.dot(q, tl.trans(k)) * scale
        scores = tl.where(inside[None, :], scores, float("-inf"))
        new_max = tl.maximum(row_max, tl.max(scores, 1))
        correction = tl.exp(row_max - new_max)
        p = tl.exp(scores - new_max[:, None])
        row_sum = row_sum * correction + tl.sum(p, 1)
        acc = acc * correction[:, None] + tl.dot(p.to(v.dtype), v)
        row_max = new_max
    out = acc / tl.where(row_sum > 0, row_sum, 1.0)[:, None]
    tl.store(out_ptr + base + rows[:, None] * DIM + dims[None, :], out, mask=rows[:, None] < length)


def triton_block_attention(
    query: Tensor, key: Tensor, value: Tensor, mask: Tensor, block: int, scale: float | None = None
) -> Tensor:
    """Block-sparse attention of a full pass: ``query, key, value: (B, H, L, d)``, ``mask (B|1, H|1,
    n_blocks, n_blocks)`` bool → ``(B, H, L, d)``; rows without keys are 0. No autograd (decoding)."""
    batch, heads, length, dim = query.shape
    if key.shape != query.shape or value.shape != query.shape:
        raise ValueError("triton_block_attention computes a full pass: query, key, value all (B, H, L, d)")
    for name, size in (("block", block), ("head dim", dim)):
        if size < 16 or size & (size - 1):
            raise ValueError(f"the Triton kernel needs a power-of-two {name} of at least 16, got {size}")
    n_blocks = math.ceil(length / block)
    table = mask[:, :, :n_blocks, :n_blocks].to(query.device).expand(batch, heads, n_blocks, n_blocks)
    indices, valid = block_indices(table)
    indices = indices.to(torch.int32).contiguous()
    counts = valid.sum(-1).to(torch.int32).contiguous()
    q, k, v = (t.contiguous() for t in (query, key, value))
    out = torch.empty_like(q)
    scale = dim**-0.5 if scale is None else scale
    grid = (n_blocks, batch * heads)
    _block_sparse_kernel[grid](
        q, k, v, out, indices, counts, length, n_blocks, indices.shape[-1], scale, BLOCK=block, DIM=dim
    )
    return out
