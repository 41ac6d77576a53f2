"""LLaDA's masked-diffusion sampler against a per-row reference loop, its schedule, per-step block masks,
and prompt caching: exact (and cheaper) when the prompt does not attend to the answer."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
from transformers import PreTrainedTokenizerBase

from litlab.core.errors import LitlabError
from litlab.lm.attention import BlockMask, use_block_attention
from litlab.lm.diffusion import diffusion_generate, transfer_counts


@pytest.fixture
def peaky(tiny_lm: Callable) -> Callable:
    return lambda objective="masked_diffusion", seed=0: tiny_lm(objective, seed, initializer_range=0.3)


def test_transfer_counts_spread_the_remainder_over_the_first_steps() -> None:
    assert transfer_counts(torch.tensor([10, 3, 0]), 4).tolist() == [[3, 3, 2, 2], [1, 1, 1, 0], [0, 0, 0, 0]]


def _reference_llada(
    model: torch.nn.Module, prompt: list[int], gen: int, steps: int, block: int, mask: int
) -> list[int]:
    """LLaDA's low-confidence remasking at temperature 0, one sequence, written with Python loops."""
    x = prompt + [mask] * gen
    per_block = steps // (gen // block)
    for b in range(gen // block):
        lo, hi = len(prompt) + b * block, len(prompt) + (b + 1) * block
        n = sum(t == mask for t in x[lo:hi])
        counts = [n // per_block + (i < n % per_block) for i in range(per_block)]
        for k in counts:
            with torch.no_grad():
                probs = model(input_ids=torch.tensor([x])).logits[0].float().softmax(-1)
            candidates = [(float(probs[i].max()), -i, i) for i in range(lo, hi) if x[i] == mask]
            for _, _, i in sorted(candidates, reverse=True)[:k]:
                x[i] = int(probs[i].argmax())
    return x


def test_diffusion_sampler_matches_the_reference_and_is_deterministic(
    peaky: Callable, tokenizer: PreTrainedTokenizerBase
) -> None:
    model, mask = peaky(), tokenizer.mask_token_id
    prompts = torch.tensor([[40, 41, 42], [300, 301, 302]])
    calls = []
    out = diffusion_generate(
        None, prompts, 8, 6, mask, block_length=4,
        forward=lambda x, step: calls.append(step) or model(input_ids=x).logits,
    )  # fmt: skip
    assert calls == list(range(6))
    assert not (out == mask).any() and torch.equal(out[:, :3], prompts)
    for row in range(2):
        assert out[row].tolist() == _reference_llada(model, prompts[row].tolist(), 8, 6, 4, mask)
    assert torch.equal(out, diffusion_generate(model, prompts, 8, 6, mask, block_length=4))
    seeded = [
        diffusion_generate(
            model, prompts, 8, 8, mask, temperature=1.0, generator=torch.Generator().manual_seed(s)
        )
        for s in (0, 0, 1)
    ]
    assert torch.equal(seeded[0], seeded[1]) and not (seeded[0] == mask).any()


def test_diffusion_sampler_unmasks_the_scheduled_number_per_step(
    peaky: Callable, tokenizer: PreTrainedTokenizerBase
) -> None:
    model, mask = peaky(), tokenizer.mask_token_id
    remaining = []

    def forward(x: torch.Tensor, step: int) -> torch.Tensor:
        remaining.append((x == mask).sum(1).tolist())
        return model(input_ids=x).logits

    diffusion_generate(None, torch.tensor([[40, 41]]), 10, 4, mask, remasking="random", forward=forward,
                       generator=torch.Generator().manual_seed(0))  # fmt: skip
    assert remaining == [[10], [7], [4], [2]]


def _positions_run(model: torch.nn.Module) -> list[int]:
    """Records the number of query positions of every forward pass of ``model``."""
    runs: list[int] = []
    model.model.embed_tokens.register_forward_pre_hook(lambda module, args: runs.append(args[0].shape[1]))
    return runs


def test_prompt_cache_is_exact_when_the_prompt_does_not_attend_to_the_answer(
    peaky: Callable, tokenizer: PreTrainedTokenizerBase
) -> None:
    model, mask = use_block_attention(peaky()), tokenizer.mask_token_id
    prompts = torch.randint(3, 600, (2, 8), generator=torch.Generator().manual_seed(0))
    pattern = torch.ones(1, 1, 4, 4, dtype=torch.bool)
    pattern[0, 0, :2, 2:] = False  # prompt blocks (0, 1) never see answer blocks (2, 3)
    isolating = BlockMask(pattern, block_size=4)
    runs = _positions_run(model)
    plain = diffusion_generate(model, prompts, 8, 8, mask, block_length=4, block_mask=isolating)
    assert runs == [16] * 8
    runs.clear()
    cached = diffusion_generate(
        model, prompts, 8, 8, mask, block_length=4, block_mask=isolating, prompt_cache=True
    )
    assert torch.equal(cached, plain)
    assert runs == [16] + [8] * 7  # the prompt is run once
    loose = diffusion_generate(model, prompts, 8, 8, mask, block_length=4, prompt_cache=True)
    assert not (loose == mask).any() and torch.equal(
        loose[:, :8], prompts
    )  # the approximate (Fast-dLLM) case


def test_a_block_mask_schedule_switches_per_global_step(
    peaky: Callable, tokenizer: PreTrainedTokenizerBase
) -> None:
    """SparseD's use: dense attention for the first steps, a sparse per-head pattern afterwards."""
    model, mask = use_block_attention(peaky()), tokenizer.mask_token_id
    sparse = BlockMask(torch.rand(1, 4, 4, 4, generator=torch.Generator().manual_seed(2)) < 0.6, 4)
    schedule = lambda step: None if step < 2 else sparse  # noqa: E731
    prompts = torch.tensor([[40, 41, 42, 43, 44, 45, 46, 47]])
    out = diffusion_generate(model, prompts, 8, 8, mask, block_length=4, block_mask=schedule)
    by_hand = diffusion_generate(
        None, prompts, 8, 8, mask, block_length=4,
        forward=lambda x, step: model(input_ids=x, block_mask=schedule(step)).logits,
    )  # fmt: skip
    assert torch.equal(out, by_hand)
    assert not torch.equal(out, diffusion_generate(model, prompts, 8, 8, mask, block_length=4))


def test_diffusion_sampler_refuses_bad_combinations(peaky: Callable, tiny_lm: Callable) -> None:
    model, prompts = peaky(), torch.tensor([[40, 41]])
    with pytest.raises(LitlabError, match="use_block_attention"):
        diffusion_generate(model, prompts, 4, 4, 2, block_mask=BlockMask.full(6, 2))
    with pytest.raises(LitlabError, match="forward= replaces the model"):
        diffusion_generate(None, prompts, 4, 4, 2, forward=lambda x, s: x, prompt_cache=True)
    with pytest.raises(LitlabError, match="needs a masked-diffusion model"):
        diffusion_generate(tiny_lm("causal"), prompts, 4, 4, 2)
