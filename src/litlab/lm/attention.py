"""Block-sparse attention masks for any transformers model that uses the attention interface (Llama, Qwen2,
Mistral, our masked-diffusion Llama): a per-head pattern of allowed (query block, key block) pairs that
holds through training (gradients flow) and sampling (prefill, KV-cached decoding, prompt-cached
diffusion), with a hook where a block-sparse kernel plugs in.

The mask format (:class:`BlockMask`):

- ``mask``: bool ``(B | 1, H | 1, n_q_blocks, n_kv_blocks)``, True = the query block may attend to the key
  block; H counts query heads (with grouped-query attention every query head has its own pattern).
- ``block_size`` b: query block i holds the absolute positions ``[i·b, (i + 1)·b)``, key block j likewise.
  Absolute positions count from the first token of the sequence, cache included; the queries of a forward
  pass are the last ``q_len`` positions of its keys (true for a full pass, KV-cached decoding and a
  prompt-cached diffusion step), so their rows are taken there.
- It is combined by AND with the model's own mask (causal, padding). A query left with no key outputs 0.

Usage: ``use_block_attention(model)`` once, then ``model(input_ids, block_mask=...)`` where ``block_mask``
is a ``BlockMask`` for every layer, a sequence with one ``BlockMask | None`` per layer (None = dense), or
None (dense, and exactly the model's usual SDPA path).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F

from litlab.core.errors import LitlabError

ATTENTION_NAME = "litlab_block_sparse"


@dataclass
class BlockMask:
    """A per-head block-sparsity pattern; see the module docstring for the format. Not frozen, so that
    Lightning moves a batch's ``block_mask`` to the device with the rest of the batch."""

    mask: torch.Tensor
    block_size: int

    def __post_init__(self) -> None:
        if self.mask.dtype != torch.bool or self.mask.ndim != 4:
            raise LitlabError(
                f"BlockMask.mask must be a bool tensor (B|1, H|1, n_q_blocks, n_kv_blocks), got "
                f"{self.mask.dtype} with shape {tuple(self.mask.shape)}"
            )
        if self.block_size < 1:
            raise LitlabError(f"BlockMask.block_size must be positive, got {self.block_size}")

    @classmethod
    def full(cls, length: int, block_size: int, heads: int = 1, batch: int = 1) -> BlockMask:
        """Every block allowed for sequences of ``length`` tokens (dense attention, as a block mask)."""
        n = math.ceil(length / block_size)
        return cls(torch.ones(batch, heads, n, n, dtype=torch.bool), block_size)

    def dense(self, q_len: int, kv_len: int) -> torch.Tensor:
        """``(B | 1, H | 1, q_len, kv_len)`` bool: the token-level mask of the last ``q_len`` of ``kv_len``
        positions (the queries of a pass) against all of them."""
        needed = math.ceil(kv_len / self.block_size)
        if self.mask.shape[-1] < needed or self.mask.shape[-2] < needed:
            raise LitlabError(
                f"the BlockMask covers {self.mask.shape[-2]}x{self.mask.shape[-1]} blocks of "
                f"{self.block_size}, too few for {kv_len} positions"
            )
        device = self.mask.device
        q_blocks = torch.arange(kv_len - q_len, kv_len, device=device) // self.block_size
        kv_blocks = torch.arange(kv_len, device=device) // self.block_size
        return self.mask[:, :, q_blocks][..., kv_blocks]


# kernel(query (B, H, Lq, d), key (B, H, Lk, d), value (B, H, Lk, d), block_mask, base_mask (B|1, 1|H, Lq, Lk)
# bool or None, is_causal, scale, dropout) -> (B, H, Lq, d). base_mask is the model's own mask (padding and
# causality); None means no padding, with causality given by is_causal.
BlockAttentionKernel = Callable[
    [torch.Tensor, torch.Tensor, torch.Tensor, BlockMask, torch.Tensor | None, bool, float, float],
    torch.Tensor,
]


def causal_mask(q_len: int, kv_len: int, device: torch.device) -> torch.Tensor:
    """``(q_len, kv_len)`` bool: the last ``q_len`` positions attend to themselves and everything before."""
    return torch.arange(kv_len - q_len, kv_len, device=device)[:, None] >= torch.arange(kv_len, device=device)


def reference_block_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    block_mask: BlockMask,
    base_mask: torch.Tensor | None,
    is_causal: bool,
    scale: float,
    dropout: float = 0.0,
) -> torch.Tensor:
    """Dense SDPA under the token-level mask ``block_mask ∧ base mask``: the definition a block-sparse
    kernel must match (it computes every score, so it saves no time)."""
    q_len, kv_len = query.shape[2], key.shape[2]
    allowed = block_mask.dense(q_len, kv_len).to(query.device)
    if base_mask is not None:
        allowed = allowed & base_mask
    elif is_causal:
        allowed = allowed & causal_mask(q_len, kv_len, query.device)
    return F.scaled_dot_product_attention(
        query, key, value, attn_mask=allowed, dropout_p=dropout, scale=scale
    )


def _layer_mask(block_mask: BlockMask | Sequence[BlockMask | None] | None, layer: int) -> BlockMask | None:
    if block_mask is None or isinstance(block_mask, BlockMask):
        return block_mask
    return block_mask[layer]


def _block_attention_forward(
    module: nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    is_causal: bool | None = None,
    block_mask: BlockMask | Sequence[BlockMask | None] | None = None,
    **kwargs: object,
) -> tuple[torch.Tensor, None]:
    """The attention-interface function: the model's SDPA path when this layer has no block mask, else the
    module's ``block_attention_kernel`` (set by ``use_block_attention``)."""
    from transformers.integrations.sdpa_attention import repeat_kv, sdpa_attention_forward

    layer_mask = _layer_mask(block_mask, module.layer_idx)
    if layer_mask is None:
        return sdpa_attention_forward(
            module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, is_causal=is_causal,
            **kwargs,
        )  # fmt: skip
    groups = getattr(module, "num_key_value_groups", 1)
    key, value = repeat_kv(key, groups), repeat_kv(value, groups)
    causal = is_causal if is_causal is not None else getattr(module, "is_causal", True)
    scale = scaling if scaling is not None else query.shape[-1] ** -0.5
    kernel = getattr(module, "block_attention_kernel", reference_block_attention)
    output = kernel(query, key, value, layer_mask, attention_mask, causal, scale, dropout)
    return output.transpose(1, 2).contiguous(), None


def use_block_attention(
    model: nn.Module, kernel: BlockAttentionKernel = reference_block_attention
) -> nn.Module:
    """Let ``model`` take ``block_mask=`` in its forward (and so in ``nll_terms``, ``sample`` and
    ``diffusion_generate``), computed by ``kernel``; returns ``model``. Without a block mask the model runs
    its usual SDPA path. Registers the attention implementation with transformers on first use."""
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask
    from transformers.modeling_utils import AttentionInterface

    if ATTENTION_NAME not in AttentionInterface._global_mapping:
        AttentionInterface.register(ATTENTION_NAME, _block_attention_forward)
        AttentionMaskInterface.register(ATTENTION_NAME, sdpa_mask)
    layers = [m for m in model.modules() if hasattr(m, "layer_idx") and hasattr(m, "is_causal")]
    if not layers:
        raise LitlabError(f"{type(model).__name__} has no attention modules that the block mask can reach")
    model.set_attn_implementation(ATTENTION_NAME)
    for layer in layers:
        layer.block_attention_kernel = kernel
    return model


def uses_block_attention(model: nn.Module) -> bool:
    """True once ``use_block_attention(model)`` has been called."""
    return getattr(getattr(model, "config", None), "_attn_implementation", None) == ATTENTION_NAME
