"""Generation and scoring against naive references: cached greedy decoding = argmax loop, seeded sampling,
token log-probs, continuation scores under padding, and LLaDA's sampler = a per-row reference loop."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
from transformers import PreTrainedTokenizerBase

from litlab.lm.generation import (
    diffusion_generate,
    generate,
    generate_text,
    pad_sequences,
    score_continuations,
    token_logprobs,
    transfer_counts,
)


@pytest.fixture
def peaky(tiny_lm: Callable) -> Callable:
    """Tiny models with large initial weights, so predictions are far from ties."""
    return lambda objective="causal", seed=0: tiny_lm(objective, seed, initializer_range=0.3)


def test_greedy_with_kv_cache_equals_an_argmax_loop(peaky: Callable) -> None:
    model = peaky()
    prompt = torch.tensor([[5, 17, 99, 230], [44, 8, 301, 12]])
    output = generate(model, prompt, max_new_tokens=12, eos_token_id=None)
    x = prompt
    with torch.no_grad():
        for _ in range(12):
            x = torch.cat([x, model(input_ids=x).logits[:, -1].argmax(-1, keepdim=True)], 1)
    assert torch.equal(output, x)


def test_left_padded_prompts_generate_as_if_alone(
    peaky: Callable, tokenizer: PreTrainedTokenizerBase
) -> None:
    model = peaky()
    prompts = ["ROMEO: What light", "KING"]
    together = generate_text(model, tokenizer, prompts, max_new_tokens=8, eos_token_id=None)
    alone = [generate_text(model, tokenizer, [p], max_new_tokens=8, eos_token_id=None)[0] for p in prompts]
    assert together == alone


def test_sampling_is_seeded_and_leaves_the_global_rng_alone(peaky: Callable) -> None:
    model = peaky()
    prompt = torch.tensor([[5, 17, 99]]).expand(4, 3)
    torch.manual_seed(123)
    state = torch.random.get_rng_state()
    first = generate(model, prompt, max_new_tokens=16, do_sample=True, temperature=1.5, seed=7)
    assert torch.equal(torch.random.get_rng_state(), state)
    assert torch.equal(
        first, generate(model, prompt, max_new_tokens=16, do_sample=True, temperature=1.5, seed=7)
    )
    assert not torch.equal(
        first, generate(model, prompt, max_new_tokens=16, do_sample=True, temperature=1.5, seed=8)
    )
    assert len({tuple(row.tolist()) for row in first}) > 1  # rows of one batch draw different samples


def test_token_logprobs_match_log_softmax_and_zero_padding(peaky: Callable) -> None:
    model = peaky()
    ids, mask = pad_sequences([[4, 9, 33, 7, 100], [8, 21]], pad_id=1)
    logprobs = token_logprobs(model, ids, mask)
    with torch.no_grad():
        reference = model(input_ids=ids[:1]).logits[0, :-1].log_softmax(-1)
    assert torch.allclose(logprobs[0], reference[torch.arange(4), ids[0, 1:]], atol=1e-5)
    assert (logprobs[1, 1:] == 0).all()


def test_continuation_scores_are_padding_invariant(
    peaky: Callable, tokenizer: PreTrainedTokenizerBase
) -> None:
    model = peaky()
    prompts = ["To be, or not", "ROMEO:", "A horse"]
    continuations = [" to be", " Good morrow, cousin.", "!"]
    scores = score_continuations(model, tokenizer, prompts, continuations, batch_size=3)
    for i, (prompt, continuation) in enumerate(zip(prompts, continuations)):
        p = tokenizer.encode(prompt, add_special_tokens=False)
        c = tokenizer.encode(continuation, add_special_tokens=False)
        lp = token_logprobs(model, torch.tensor([p + c])).detach()[0, len(p) - 1 :]
        assert float(scores["logprob"][i]) == pytest.approx(float(lp.sum()), abs=1e-4)
        assert int(scores["n_tokens"][i]) == len(c) and int(scores["n_bytes"][i]) == len(
            continuation.encode()
        )
    greedy = generate_text(model, tokenizer, ["ROMEO:"], max_new_tokens=4, eos_token_id=None)[0]
    assert bool(score_continuations(model, tokenizer, ["ROMEO:"], [greedy])["greedy"][0])


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
    model, mask = peaky("masked_diffusion"), tokenizer.mask_token_id
    prompts = torch.tensor([[40, 41, 42], [300, 301, 302]])
    calls = []
    out = diffusion_generate(
        None,
        prompts,
        8,
        6,
        mask,
        block_length=4,
        forward=lambda x, step: calls.append(step) or model(input_ids=x).logits,
    )
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
    model, mask = peaky("masked_diffusion"), tokenizer.mask_token_id
    remaining = []

    def forward(x: torch.Tensor, step: int) -> torch.Tensor:
        remaining.append((x == mask).sum(1).tolist())
        return model(input_ids=x).logits

    diffusion_generate(None, torch.tensor([[40, 41]]), 10, 4, mask, remasking="random", forward=forward,
                       generator=torch.Generator().manual_seed(0))  # fmt: skip
    assert remaining == [[10], [7], [4], [2]]


def test_sampling_without_filters_draws_from_the_whole_vocabulary(tiny_lm: Callable) -> None:
    model = tiny_lm("causal")  # near-uniform next-token distribution over 600 ids
    drawn = generate(model, torch.full((3000, 1), 5), max_new_tokens=1, do_sample=True, seed=0)[:, 1]
    assert len(drawn.unique()) > 400  # transformers' default top-50 filter would allow at most 50
    top = generate(model, torch.full((3000, 1), 5), max_new_tokens=1, do_sample=True, top_k=10, seed=0)[:, 1]
    assert len(top.unique()) <= 10
