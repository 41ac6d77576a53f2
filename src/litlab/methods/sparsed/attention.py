"""SparseD's attention for a masked-diffusion LM of ``litlab.lm``: per layer, the kernel hook of
``litlab.lm.use_block_attention`` either selects a pattern (dense attention that step) or applies a stored
one with a block-sparse kernel.

The hook passes a layer's ``BlockMask`` to its kernel but not the layer's index, so each attention module
gets its own bound kernel (``SparseDAttention.attach``); a :class:`SelectMask` asks a layer to select.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from torch import Tensor, nn
from torch.nn import functional as F

from litlab.core.errors import ConfigError
from litlab.kernels.block_sparse_attention import (
    dense_block_attention,
    flex_block_attention,
    gather_block_attention,
)
from litlab.lm import BlockMask, use_block_attention
from litlab.methods.sparsed.selection import select_pattern

KERNELS = ("gather", "flex", "triton", "reference")


@dataclass
class SelectMask(BlockMask):
    """A full block mask that tells SparseD's kernel to select this layer's pattern from the step's queries
    and keys; ``apply`` = use it at once (the per-step recomputed arm), else attend densely (SparseD)."""

    apply: bool = False


def _without_token_mask(
    kernel: Callable[..., Tensor],
    q: Tensor,
    k: Tensor,
    v: Tensor,
    mask: Tensor,
    block: int,
    scale: float,
    token_mask: Tensor | None,
) -> Tensor:
    if token_mask is not None:
        raise ConfigError(
            "the flex and triton kernels take no padding mask; use kernel=gather for padded batches"
        )
    return kernel(q, k, v, mask, block, scale)


def sparse_kernel(name: str) -> Callable[..., Tensor]:
    """``(q, k, v, mask, block, scale, token_mask) -> out`` for a kernel name in ``KERNELS``."""
    if name == "gather":
        return gather_block_attention
    if name == "reference":
        return dense_block_attention
    if name == "flex":
        return partial(_without_token_mask, flex_block_attention)
    if name == "triton":
        from litlab.kernels.block_sparse_attention_triton import triton_block_attention

        return partial(_without_token_mask, triton_block_attention)
    raise ConfigError(f"kernel={name!r}; choose one of {', '.join(KERNELS)}")


class SparseDAttention:
    """Per-layer patterns of one decoding run and the kernel that selects or applies them.

    Args:
        rho: kept share of key blocks (⌊n·ρ⌋ + 1 per head and query block).
        block: block size b.
        gen_length: generation tokens at the end of the sequence (isolated selection's keys).
        isolated: isolated selection of generation keys (ablation: false).
        head_average: one head-averaged pattern for all heads (ablation: true).
        kernel: ``gather`` (torch), ``flex`` (flex_attention), ``triton`` (GPU) or ``reference`` (dense).
    """

    def __init__(
        self,
        rho: float,
        block: int,
        gen_length: int,
        isolated: bool = True,
        head_average: bool = False,
        kernel: str = "gather",
    ) -> None:
        if not 0 <= rho <= 1 or block < 1:
            raise ConfigError(f"rho={rho} must lie in [0, 1] and block={block} be positive")
        self.rho, self.block, self.gen_length = rho, block, gen_length
        self.isolated, self.head_average = isolated, head_average
        self.kernel = sparse_kernel(kernel)
        self.patterns: dict[int, Tensor] = {}

    def attach(self, model: nn.Module) -> nn.Module:
        """Route every attention layer of ``model`` through this object (``use_block_attention``)."""
        use_block_attention(model)
        for module in model.modules():
            if hasattr(module, "layer_idx") and hasattr(module, "block_attention_kernel"):
                module.block_attention_kernel = partial(self, module.layer_idx)
        return model

    def select(self, layer: int, query: Tensor, key: Tensor, scale: float) -> Tensor:
        """Select and store ``layer``'s pattern from this step's queries and keys."""
        pattern = select_pattern(
            query, key, self.block, self.rho, self.gen_length, self.isolated, self.head_average, scale
        )
        self.patterns[layer] = pattern
        return pattern

    def masks(self, n_layers: int) -> list[BlockMask]:
        """The stored patterns as one ``BlockMask`` per layer."""
        return [BlockMask(self.patterns[layer], self.block) for layer in range(n_layers)]

    def __call__(
        self,
        layer: int,
        query: Tensor,
        key: Tensor,
        value: Tensor,
        block_mask: BlockMask,
        base_mask: Tensor | None,
        is_causal: bool,
        scale: float,
        dropout: float = 0.0,
    ) -> Tensor:
        """The ``litlab.lm`` kernel hook for one layer: select (dense output, or sparse with ``apply``),
        or attend under the given block mask with the sparse kernel."""
        if base_mask is None and is_causal:
            raise ConfigError(
                "SparseD's attention is bidirectional (a masked-diffusion LM), got a causal layer"
            )
        if base_mask is not None and bool(base_mask.all()):
            base_mask = None  # no padding: the kernels need no token mask
        if isinstance(block_mask, SelectMask):
            pattern = self.select(layer, query, key, scale)
            if not block_mask.apply:
                return F.scaled_dot_product_attention(query, key, value, attn_mask=base_mask, scale=scale)
            block_mask = BlockMask(pattern, self.block)
        return self.kernel(query, key, value, block_mask.mask, block_mask.block_size, scale, base_mask)
