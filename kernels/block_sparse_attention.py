"""Attention restricted to a per-(head, query-block) set of key blocks (SparseD's sparse steps).

The pattern is a bool table ``mask: (B | 1, H | 1, n_q_blocks, n_kv_blocks)``, True = query block i may
attend to key block j; block i holds absolute positions ``[i·b, (i + 1)·b)``. The queries of a pass are the
last ``Lq`` of the ``Lk`` key positions (a full pass has Lq = Lk). A query with no allowed key outputs 0.

Three computations of the same thing:

- :func:`dense_block_attention`: dense SDPA under the expanded token mask, the reference (no saving).
- :func:`gather_block_attention`: pure torch. The kept key blocks of each (head, query block) are padded to
  one fixed count K, gathered into ``(B, H, n_q, K·b, d)`` and attended by one batched SDPA: cost K/n_kv of
  dense, differentiable, any device.
- :func:`flex_block_attention`: torch's ``flex_attention`` with a ``BlockMask`` built from the same block
  indices (compile it on GPU; eager CPU flex materialises every score, so use it to test).

``litlab.kernels.block_sparse_attention_triton`` holds the Triton kernel (forward only).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor
from torch.nn import functional as F


def _check(query: Tensor, key: Tensor, value: Tensor, mask: Tensor, block: int) -> None:
    if query.ndim != 4 or key.shape != value.shape or key.shape[:2] != query.shape[:2]:
        raise ValueError(
            f"need query (B, H, Lq, d), key and value (B, H, Lk, d); got {tuple(query.shape)}, "
            f"{tuple(key.shape)}, {tuple(value.shape)}"
        )
    if mask.dtype != torch.bool or mask.ndim != 4:
        raise ValueError(
            f"mask must be bool (B|1, H|1, n_q_blocks, n_kv_blocks), got {mask.dtype} {mask.ndim}-d"
        )
    n_kv = math.ceil(key.shape[2] / block)
    if mask.shape[-1] < n_kv or mask.shape[-2] < n_kv or query.shape[2] > key.shape[2]:
        raise ValueError(
            f"a {tuple(mask.shape[-2:])} block table of {block} covers too few of {key.shape[2]} keys "
            f"(or there are more queries, {query.shape[2]}, than keys)"
        )


def expand_block_mask(mask: Tensor, block: int, q_len: int, kv_len: int) -> Tensor:
    """``(B | 1, H | 1, q_len, kv_len)`` bool token mask of the last ``q_len`` positions against all."""
    q_blocks = torch.arange(kv_len - q_len, kv_len, device=mask.device) // block
    kv_blocks = torch.arange(kv_len, device=mask.device) // block
    return mask[:, :, q_blocks][..., kv_blocks]


def dense_block_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    mask: Tensor,
    block: int,
    scale: float | None = None,
    token_mask: Tensor | None = None,
) -> Tensor:
    """The reference: SDPA under ``expand(mask) ∧ token_mask`` (``token_mask: (B|1, H|1, Lq, Lk)``), rows
    without any key set to 0. ``query: (B, H, Lq, d)``, ``key, value: (B, H, Lk, d)`` → ``(B, H, Lq, d)``."""
    _check(query, key, value, mask, block)
    allowed = expand_block_mask(mask, block, query.shape[2], key.shape[2])
    if token_mask is not None:
        allowed = allowed & token_mask
    has_key = allowed.any(-1, keepdim=True)
    allowed = allowed | ~has_key  # keep fully masked rows finite; they are zeroed below
    out = F.scaled_dot_product_attention(query, key, value, attn_mask=allowed, scale=scale)
    return out * has_key


def block_indices(mask: Tensor) -> tuple[Tensor, Tensor]:
    """The kept key blocks of each row of ``mask (..., n_kv)``, padded to the largest count K:
    ``indices (..., K)`` (ascending, padding repeats block 0) and ``valid (..., K)`` bool."""
    counts = mask.sum(-1)
    width = max(int(counts.max()), 1) if mask.numel() else 1
    n_kv = mask.shape[-1]
    # A stable sort of (not kept) puts the kept blocks first, in ascending order.
    order = torch.sort((~mask).to(torch.uint8), dim=-1, stable=True).indices[..., :width]
    valid = torch.arange(width, device=mask.device) < counts[..., None]
    if width > n_kv:  # only when the table has no blocks at all
        order = order.new_zeros(*mask.shape[:-1], width)
    return torch.where(valid, order, torch.zeros_like(order)), valid


def gather_block_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    mask: Tensor,
    block: int,
    scale: float | None = None,
    token_mask: Tensor | None = None,
    q_block_chunk: int | None = None,
) -> Tensor:
    """Block-sparse attention by gathering each row's kept key blocks (pure torch, differentiable).

    ``query: (B, H, Lq, d)``, ``key, value: (B, H, Lk, d)``, ``mask`` the block table, ``token_mask``
    an optional ``(B|1, H|1, Lq, Lk)`` bool mask ANDed in (padding); ``q_block_chunk`` query blocks are
    processed at a time to bound the ``(B, H, chunk, K·b, d)`` gathered keys (None: all at once).
    Returns ``(B, H, Lq, d)``, equal to :func:`dense_block_attention`.
    """
    _check(query, key, value, mask, block)
    batch, heads, q_len, dim = query.shape
    kv_len = key.shape[2]
    offset = kv_len - q_len
    first, lead = divmod(offset, block)
    n_q = math.ceil((lead + q_len) / block)
    n_kv = math.ceil(kv_len / block)
    q_pad = F.pad(query, (0, 0, lead, n_q * block - lead - q_len))
    k_blocks = F.pad(key, (0, 0, 0, n_kv * block - kv_len)).view(batch, heads, n_kv, block, dim)
    v_blocks = F.pad(value, (0, 0, 0, n_kv * block - kv_len)).view(batch, heads, n_kv, block, dim)
    table = mask[:, :, first : first + n_q, :n_kv].to(query.device).expand(batch, heads, n_q, n_kv)
    indices, valid = block_indices(table)
    if token_mask is not None:
        rows = F.pad(token_mask.expand(batch, heads, q_len, kv_len), (0, n_kv * block - kv_len, lead, 0))
        rows = F.pad(rows, (0, 0, 0, n_q * block - lead - q_len)).view(batch, heads, n_q, block, -1)
    chunk = q_block_chunk or n_q
    outputs = []
    for start in range(0, n_q, chunk):
        stop = min(start + chunk, n_q)
        idx, ok = indices[:, :, start:stop], valid[:, :, start:stop]
        n, width = stop - start, idx.shape[-1]
        gather_at = idx.reshape(batch, heads, n * width, 1, 1).expand(-1, -1, -1, block, dim)
        k_kept = k_blocks.gather(2, gather_at).view(batch * heads * n, width * block, dim)
        v_kept = v_blocks.gather(2, gather_at).view(batch * heads * n, width * block, dim)
        positions = (idx[..., None] * block + torch.arange(block, device=idx.device)).flatten(-2)
        columns = ok.repeat_interleave(block, -1) & (positions < kv_len)  # (B, H, n, K·b)
        if token_mask is None:  # one key mask per query block, broadcast over its rows
            allowed = columns[..., None, :]
        else:
            at = positions[..., None, :].expand(-1, -1, -1, block, -1)
            allowed = columns[..., None, :] & rows[:, :, start:stop].gather(-1, at)
        has_key = allowed.any(-1, keepdim=True)
        every_row = bool(has_key.all())
        attn_mask = None
        if not bool(allowed.all()):
            allowed = allowed | ~has_key  # keep rows without keys finite; they are zeroed below
            attn_mask = allowed.reshape(batch * heads * n, allowed.shape[-2], width * block)
        q_chunk = q_pad[:, :, start * block : stop * block].reshape(batch * heads * n, block, dim)
        out = F.scaled_dot_product_attention(q_chunk, k_kept, v_kept, attn_mask=attn_mask, scale=scale)
        out = out.view(batch, heads, n, block, dim)
        outputs.append((out if every_row else out * has_key).flatten(2, 3))
    return torch.cat(outputs, 2)[:, :, lead : lead + q_len]


def flex_block_mask(mask: Tensor, block: int, q_len: int, kv_len: int, batch: int, heads: int):
    """A ``torch.nn.attention.flex_attention.BlockMask`` for a full pass (``q_len == kv_len``): the kept
    blocks of ``mask`` as its sparse block index, and the same table (plus the end of the keys) as its
    mask_mod, which is what eager flex and partial blocks evaluate."""
    from torch.nn.attention.flex_attention import BlockMask as FlexBlockMask

    n_q, n_kv = math.ceil(q_len / block), math.ceil(kv_len / block)
    table = mask[:, :, :n_q, :n_kv].expand(batch, heads, n_q, n_kv)
    order = torch.sort((~table).to(torch.uint8), dim=-1, stable=True).indices.to(torch.int32)
    counts = table.sum(-1).to(torch.int32)

    def kept(b: Tensor, h: Tensor, q: Tensor, kv: Tensor) -> Tensor:
        # The block structure only skips work; the mask_mod must itself say which scores count.
        return table[b, h, q // block, kv // block] & (kv < kv_len)

    return FlexBlockMask.from_kv_blocks(
        counts, order, BLOCK_SIZE=block, mask_mod=kept, seq_lengths=(q_len, kv_len)
    )


def flex_block_attention(
    query: Tensor, key: Tensor, value: Tensor, mask: Tensor, block: int, scale: float | None = None
) -> Tensor:
    """``flex_attention`` under the block table (a full pass, ``Lq == Lk``); rows without keys are 0.
    Eager on CPU (for tests); wrap ``flex_attention`` in ``torch.compile`` for speed on GPU."""
    from torch.nn.attention.flex_attention import flex_attention

    _check(query, key, value, mask, block)
    if query.shape[2] != key.shape[2]:
        raise ValueError("flex_block_attention computes a full pass: Lq must equal Lk")
    batch, heads, length, _ = query.shape
    block_mask = flex_block_mask(mask.to(query.device), block, length, length, batch, heads)
    out = flex_attention(query, key, value, block_mask=block_mask, scale=scale)
    has_key = expand_block_mask(mask.to(query.device), block, length, length).any(-1, keepdim=True)
    return out * has_key
