"""LLaDA's masked-diffusion sampler (semi-autoregressive blocks, low-confidence remasking) with per-step
block-sparse attention and prompt caching, the hooks SparseD-style methods need.

Prompt caching: the prompt's keys and values are computed once, in the first step's full pass, and every
later step runs only the generated positions against them. This is exact when prompt queries never attend
to generated keys (a block mask that forbids it, or a prefix-LM model); otherwise it is the approximation of
Fast-dLLM's prefix cache (the prompt keeps the representation it had when the answer was all masks).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from transformers import PreTrainedModel

from litlab.core.errors import LitlabError
from litlab.lm.attention import BlockMask, uses_block_attention
from litlab.lm.decoding import fork_cache, model_forward, new_cache
from litlab.lm.models import require_diffusion

DiffusionForward = Callable[[torch.Tensor, int], torch.Tensor]
LayerMasks = BlockMask | Sequence[BlockMask | None]
# A block mask for every step, or ``step -> mask`` (None = dense at that step), as SparseD switches to sparse
# attention after its dense early steps.
BlockMaskSchedule = LayerMasks | Callable[[int], LayerMasks | None]


def transfer_counts(n_masked: torch.Tensor, steps: int) -> torch.Tensor:
    """``(B, steps)``: how many tokens each step unmasks, n // steps each and the remainder on the first
    steps (LLaDA's ``get_num_transfer_tokens``). ``n_masked: (B,)``."""
    base = n_masked[:, None] // steps
    remainder = n_masked[:, None] % steps
    return base + (torch.arange(steps, device=n_masked.device)[None] < remainder).long()


def _gumbel_argmax(
    logits: torch.Tensor, temperature: float, generator: torch.Generator | None
) -> torch.Tensor:
    """LLaDA's sampling: argmax of exp(logits) / (−log u)^temperature in float64 (Gumbel-max at T = 1)."""
    if temperature == 0:
        return logits.argmax(-1)
    logits = logits.double()
    noise = torch.rand(logits.shape, dtype=torch.float64, device=logits.device, generator=generator)
    return (logits.exp() / (-noise.log()) ** temperature).argmax(-1)


class _ModelLogits:
    """``(x, step) -> (B, G, V)`` logits of the generated positions: a full pass, or with ``prompt_cache``
    the first pass stores the prompt's keys and values and later passes run the generation alone."""

    def __init__(
        self,
        model: PreTrainedModel,
        prompt_length: int,
        block_mask: BlockMaskSchedule | None,
        prompt_cache: bool,
    ) -> None:
        self.model, self.prompt_length = model, prompt_length
        self.block_mask, self.prompt_cache = block_mask, prompt_cache
        self.cache = None

    def __call__(self, x: torch.Tensor, step: int) -> torch.Tensor:
        schedule = self.block_mask
        mask = schedule(step) if callable(schedule) else schedule
        kwargs = {} if mask is None else {"block_mask": mask}
        if not self.prompt_cache:
            return self.model(input_ids=x, **kwargs).logits[:, self.prompt_length :]
        if self.cache is None:
            cache = new_cache(self.model)
            logits = model_forward(self.model, x, cache, **kwargs)
            self.cache = fork_cache(cache, length=self.prompt_length)
            return logits[:, self.prompt_length :]
        return model_forward(self.model, x[:, self.prompt_length :], fork_cache(self.cache), **kwargs)


@torch.no_grad()
def diffusion_generate(
    model: PreTrainedModel | None,
    prompt_ids: torch.Tensor,
    gen_length: int,
    steps: int,
    mask_token_id: int,
    block_length: int | None = None,
    temperature: float = 0.0,
    remasking: str = "low_confidence",
    generator: torch.Generator | None = None,
    forward: DiffusionForward | None = None,
    block_mask: BlockMaskSchedule | None = None,
    prompt_cache: bool = False,
) -> torch.Tensor:
    """LLaDA's reverse process: ``(B, P)`` prompts → ``(B, P + gen_length)`` with every mask filled.

    The answer is decoded in ``gen_length / block_length`` semi-autoregressive blocks, each in
    ``steps / n_blocks`` steps. At each step the model predicts every masked token (Gumbel-max at
    ``temperature``, argmax at 0) and the ``transfer_counts`` most confident predictions in the current
    block are kept ('low_confidence' remasking: confidence = softmax probability of the prediction;
    'random': uniform scores).

    ``block_mask``: a ``BlockMask`` (or one per layer) for every step, or ``step -> mask | None`` with the
    global step index across blocks (the model must have ``use_block_attention``). ``prompt_cache``: reuse
    the prompt's keys and values after the first step (see the module docstring). ``forward(x, step) ->
    logits (B, P + G, V)`` replaces the model entirely when given (a custom attention per step).
    """
    if remasking not in ("low_confidence", "random"):
        raise ValueError(f"remasking={remasking!r}; choose low_confidence or random")
    block_length = block_length or gen_length
    if gen_length % block_length or steps % (gen_length // block_length):
        raise ValueError("gen_length must be a multiple of block_length, and steps of the number of blocks")
    batch, prompt_length = prompt_ids.shape
    if forward is not None:
        if block_mask is not None or prompt_cache:
            raise LitlabError("forward= replaces the model; block_mask and prompt_cache apply to a model")

        def logits_of(x: torch.Tensor, step: int) -> torch.Tensor:
            return forward(x, step)[:, prompt_length:]
    else:
        if model is None:
            raise ValueError("give a model or a forward(x, step) function")
        require_diffusion(model, "diffusion_generate")
        if block_mask is not None and not uses_block_attention(model):
            raise LitlabError("block_mask needs litlab.lm.use_block_attention(model) first")
        logits_of = _ModelLogits(model, prompt_length, block_mask, prompt_cache)

    x = torch.full(
        (batch, prompt_length + gen_length), mask_token_id, dtype=torch.long, device=prompt_ids.device
    )
    x[:, :prompt_length] = prompt_ids
    n_blocks = gen_length // block_length
    steps_per_block = steps // n_blocks
    positions = torch.arange(gen_length, device=x.device)[None]
    step = 0
    for block in range(n_blocks):
        block_end = (block + 1) * block_length
        in_block = x[:, prompt_length + block * block_length : prompt_length + block_end] == mask_token_id
        counts = transfer_counts(in_block.sum(1), steps_per_block)
        for inner in range(steps_per_block):
            generated = x[:, prompt_length:]
            masked = generated == mask_token_id
            logits = logits_of(x, step)
            prediction = _gumbel_argmax(logits, temperature, generator)
            if remasking == "low_confidence":
                probs = logits.float().softmax(-1)
                confidence = torch.gather(probs, -1, prediction[..., None])[..., 0]
            else:
                confidence = torch.rand(generated.shape, device=x.device, generator=generator)
            confidence = confidence.masked_fill(~masked | (positions >= block_end), -torch.inf)
            order = confidence.argsort(dim=1, descending=True, stable=True)
            rank = torch.empty_like(order).scatter_(1, order, positions.expand_as(order))
            transfer = (rank < counts[:, inner : inner + 1]) & masked & (positions < block_end)
            x[:, prompt_length:] = torch.where(transfer, prediction, generated)
            step += 1
    return x
