"""The paper's three observations, re-measured on a decoding run with dense attention: tile-importance maps
of every (step, layer, head) are recorded, then compared across heads (observation 1: patterns differ) and
across steps (observation 2: each head's pattern stays similar); observation 3 (early steps matter) is the
agreement of SparseD with dense decoding as a function of the dense share s (``evaluation.compare_arms``)."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor
from transformers import PreTrainedModel

from litlab.lm import diffusion_generate
from litlab.methods.sparsed.attention import SelectMask, SparseDAttention
from litlab.methods.sparsed.selection import tile_importance


class _ImportanceRecorder(SparseDAttention):
    """Attends densely at every step while keeping each layer's tile importance ``(B, H, n, n)``."""

    def __init__(self, block: int) -> None:
        super().__init__(rho=1.0, block=block, gen_length=0)
        self.steps: list[dict[int, Tensor]] = []

    def select(self, layer: int, query: Tensor, key: Tensor, scale: float) -> Tensor:
        if layer == 0:
            self.steps.append({})
        self.steps[-1][layer] = tile_importance(query, key, self.block, scale)
        return torch.ones(1, 1, 1, 1, dtype=torch.bool)


@torch.no_grad()
def record_importance(
    model: PreTrainedModel, prompt_ids: Tensor, gen_length: int, steps: int, block: int
) -> Tensor:
    """``(T, layers, B, H, n, n)`` tile importance at every step of dense decoding of ``prompt_ids``."""
    recorder = _ImportanceRecorder(block)
    recorder.attach(model)
    n_layers = model.config.num_hidden_layers
    n = -(-(prompt_ids.shape[1] + gen_length) // block)
    full = torch.ones(1, 1, n, n, dtype=torch.bool)
    diffusion_generate(
        model,
        prompt_ids,
        gen_length,
        steps,
        model.config.mask_token_id,
        block_mask=lambda step: [SelectMask(full, block) for _ in range(n_layers)],
    )
    return torch.stack([torch.stack([step[layer] for layer in range(n_layers)]) for step in recorder.steps])


def _cosine(a: Tensor, b: Tensor) -> Tensor:
    """Cosine similarity of flattened maps over the last two dimensions."""
    return torch.nn.functional.cosine_similarity(a.flatten(-2), b.flatten(-2), dim=-1)


def observations(importance: Tensor, select_at: int) -> dict[str, Any]:
    """From ``(T, layers, B, H, n, n)`` maps: mean cosine similarity between different heads of a layer
    (at ``select_at``), and of each head's map at every step with its map at ``select_at`` (per step)."""
    heads = importance.shape[3]
    at = importance[select_at]  # (layers, B, H, n, n)
    pairs = _cosine(at[:, :, :, None], at[:, :, None, :])  # (layers, B, H, H)
    off_diagonal = ~torch.eye(heads, dtype=torch.bool)
    cross_head = pairs[..., off_diagonal].mean().item()
    per_step = _cosine(importance, at[None]).mean((1, 2, 3))  # (T,)
    return {
        "cross_head_cosine": cross_head,
        "cross_step_cosine": per_step.tolist(),
        "cross_step_cosine_after_select": per_step[select_at + 1 :].mean().item(),
        "cross_step_cosine_to_step0": _cosine(importance[0], at).mean().item(),
    }
