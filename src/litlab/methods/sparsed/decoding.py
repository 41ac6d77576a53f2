"""Lightning-free SparseD decoding: LLaDA's low-confidence remasking sampler
(``litlab.lm.diffusion_generate``) with dense attention for the first steps, one selection pass, and the
selected head-specific block-sparse pattern reused for every later step.

Steps are counted from 0 across the semi-autoregressive blocks. With t_s = ⌊T·s⌋ (SparseD's ⌊T·s⌋ + 1,
counted from 1), steps ``t < t_s`` run dense SDPA, step ``t_s`` runs dense SDPA and selects the pattern of
every layer, steps ``t > t_s`` apply it. ``pattern='sink_window'`` replaces the selected pattern by a fixed
sink + local window of the same per-row budget; ``recompute=True`` selects afresh at every sparse step.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
from transformers import PreTrainedModel

from litlab.core.errors import ConfigError
from litlab.lm import BlockMask, diffusion_generate
from litlab.methods.sparsed.attention import SelectMask, SparseDAttention
from litlab.methods.sparsed.selection import row_budget, sink_window_pattern

ATTENTIONS = ("dense", "sparsed")
PATTERNS = ("topk", "sink_window")


@dataclass
class DecodeOutput:
    """``sequences (B, P + G)``; ``density``: kept tiles / all tiles of the sparse pattern (mean over layers,
    heads, batch); ``attention_cost``: attention FLOPs relative to dense decoding (dense and selection steps
    count 1, sparse steps their density); ``patterns``: the per-layer tables ``(B, H, n, n)`` used."""

    sequences: torch.Tensor
    density: float = 1.0
    attention_cost: float = 1.0
    patterns: list[torch.Tensor] = field(default_factory=list)


def select_step(steps: int, s: float) -> int:
    """The 0-based step at which SparseD selects its pattern: ⌊T·s⌋ (dense before and at it)."""
    if not 0 <= s < 1:
        raise ConfigError(f"s={s} must lie in [0, 1): the share of steps kept dense")
    return math.floor(steps * s)


def generate(
    model: PreTrainedModel,
    prompt_ids: torch.Tensor,
    gen_length: int,
    steps: int,
    attention: str = "sparsed",
    s: float = 0.2,
    rho: float = 0.3,
    block: int = 16,
    block_length: int | None = None,
    isolated: bool = True,
    head_average: bool = False,
    recompute: bool = False,
    pattern: str = "topk",
    kernel: str = "gather",
    temperature: float = 0.0,
    generator: torch.Generator | None = None,
) -> DecodeOutput:
    """Decode ``gen_length`` tokens after ``prompt_ids (B, P)`` (equal-length prompts) in ``steps`` steps.

    ``attention='dense'`` is LLaDA's sampler unchanged; ``'sparsed'`` is SparseD with skip share ``s``, kept
    share ``rho`` and block size ``block``. Ablations: ``isolated=False`` (no isolated selection of the
    generation keys), ``head_average=True`` (one head-averaged pattern), ``recompute=True`` (select at every
    sparse step, the oracle), ``pattern='sink_window'`` (a fixed sink + window), ``s=0`` (no dense early
    steps besides the selection pass). The model gets ``use_block_attention`` hooks (harmless when dense).
    """
    if attention not in ATTENTIONS:
        raise ConfigError(f"attention={attention!r}; choose one of {', '.join(ATTENTIONS)}")
    if pattern not in PATTERNS:
        raise ConfigError(f"pattern={pattern!r}; choose one of {', '.join(PATTERNS)}")
    mask_id = model.config.mask_token_id
    if attention == "dense":
        sequences = diffusion_generate(
            model, prompt_ids, gen_length, steps, mask_id, block_length, temperature, generator=generator
        )
        return DecodeOutput(sequences)
    t_select = select_step(steps, s)
    controller = SparseDAttention(rho, block, gen_length, isolated, head_average, kernel)
    controller.attach(model)
    n_layers = model.config.num_hidden_layers
    length = prompt_ids.shape[1] + gen_length
    n_blocks = math.ceil(length / block)
    fixed = None
    if pattern == "sink_window":
        keep = row_budget(length, gen_length, block, rho, isolated)
        fixed = [BlockMask(sink_window_pattern(n_blocks, keep), block)] * n_layers

    def schedule(step: int) -> list[BlockMask] | None:
        if step < t_select or (fixed is not None and step == t_select):
            return None
        if fixed is not None:
            return fixed
        if step == t_select or recompute:
            full = torch.ones(1, 1, n_blocks, n_blocks, dtype=torch.bool)
            return [SelectMask(full, block, apply=step > t_select) for _ in range(n_layers)]
        return controller.masks(n_layers)

    sequences = diffusion_generate(
        model,
        prompt_ids,
        gen_length,
        steps,
        mask_id,
        block_length,
        temperature,
        generator=generator,
        block_mask=schedule,
    )
    patterns = [m.mask for m in fixed] if fixed else [controller.patterns[i] for i in range(n_layers)]
    density = torch.stack([p.float().mean() for p in patterns]).mean().item()
    sparse_steps = steps - t_select - 1
    return DecodeOutput(sequences, density, (t_select + 1 + sparse_steps * density) / steps, patterns)
