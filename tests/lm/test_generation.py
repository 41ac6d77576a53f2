"""Sampling and scoring of causal LMs against naive references: cached greedy decoding = an argmax loop,
left padding = no padding (Llama and GPT-2), seeded sampling, several samples per prompt, log-probs =
a full recomputation at the sampling temperature, EOS and stop strings with the end-of-text mask, and
diffusion models refused."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from litlab.core.errors import LitlabError
from litlab.lm.decoding import DecodeState
from litlab.lm.evaluation import exact_match, multiple_choice
from litlab.lm.generation import (
    encode_prompts,
    generate,
    generate_text,
    pad_sequences,
    sample,
    sample_text,
    score_continuations,
    token_logprobs,
)


@pytest.fixture
def peaky(tiny_lm: Callable) -> Callable:
    """Tiny models with large initial weights, so predictions are far from ties."""
    return lambda objective="causal", seed=0: tiny_lm(objective, seed, initializer_range=0.3)


@pytest.fixture(params=["llama", "gpt2"])
def causal(request: pytest.FixtureRequest, peaky: Callable, gpt2_lm: PreTrainedModel) -> PreTrainedModel:
    """A Llama (rotary, relative positions) and a GPT-2 (absolute positions)."""
    return peaky() if request.param == "llama" else gpt2_lm


def test_greedy_with_kv_cache_equals_an_argmax_loop(causal: PreTrainedModel) -> None:
    prompt = torch.tensor([[5, 17, 99, 230], [44, 8, 301, 12]])
    output = generate(causal, prompt, max_new_tokens=12)
    x = prompt
    with torch.no_grad():
        for _ in range(12):
            x = torch.cat([x, causal(input_ids=x).logits[:, -1].argmax(-1, keepdim=True)], 1)
    assert torch.equal(output, x)


def test_left_padded_prompts_generate_as_if_alone(
    causal: PreTrainedModel, tokenizer: PreTrainedTokenizerBase
) -> None:
    prompts = ["ROMEO: What light", "KING"]
    together = generate_text(causal, tokenizer, prompts, max_new_tokens=8, eos_token_id=None)
    alone = [generate_text(causal, tokenizer, [p], max_new_tokens=8, eos_token_id=None)[0] for p in prompts]
    assert together == alone


def test_token_logprobs_ignore_left_padding(causal: PreTrainedModel) -> None:
    """The issue's defect: GPT-2's absolute positions were shifted by left padding (Llama's rotary ones are
    relative, so it was unaffected)."""
    rows = [[4, 9, 33, 7, 100, 41], [8, 21, 5]]
    ids, mask = pad_sequences(rows, pad_id=1, side="left")
    with torch.no_grad():
        padded = token_logprobs(causal, ids, mask)
        alone = token_logprobs(causal, torch.tensor([rows[1]]))
    assert torch.allclose(padded[1, -2:], alone[0], atol=1e-5)
    assert (padded[1, :3] == 0).all()


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


@pytest.mark.parametrize("temperature", [0.0, 0.7, 1.3])
def test_sampled_logprobs_equal_a_recomputation_at_the_temperature(
    causal: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, temperature: float
) -> None:
    """What a GRPO loss needs: the old-policy log-probs of the sampled tokens (softmax(logits / T), T = 1
    for greedy) equal token_logprobs on the returned sequences, row by row, under the end-of-text mask."""
    ids, mask = encode_prompts(tokenizer, ["ROMEO:", "To be, or not to be"])
    eos = int(generate(causal, ids, mask, max_new_tokens=3)[0, -1])  # row 0 ends at its third token
    out = sample(
        causal,
        ids,
        mask,
        10,
        num_samples=3,
        temperature=temperature,
        eos_token_id=eos,
        pad_token_id=1,
        seed=3,
    )
    assert out.prompt_index.tolist() == [0, 0, 0, 1, 1, 1]
    assert torch.equal(out.sequences[:, : ids.shape[1]], ids.repeat_interleave(3, 0))
    scale = temperature if temperature > 0 else 1.0
    with torch.no_grad():
        again = token_logprobs(causal, out.sequences, out.attention_mask, temperature=scale)
    completion = again[:, ids.shape[1] - 1 :]
    assert torch.allclose(completion * out.completion_mask, out.logprobs, atol=1e-4)
    if temperature == 0:
        assert out.completion_mask[0].tolist() == [True] * 3 + [False] * 7 and bool(out.finished[0])
    ends = out.completion_mask.sum(1)
    ended_with_eos = out.completion_ids[torch.arange(6), ends - 1] == eos
    assert torch.equal(out.finished, ended_with_eos)
    assert ((out.completion_ids == 1) | out.completion_mask).all()  # padding after the end


def test_stop_strings_end_the_text_and_are_cut_off(
    peaky: Callable, tokenizer: PreTrainedTokenizerBase
) -> None:
    model = peaky()
    free, generation = sample_text(model, tokenizer, ["ROMEO:"], 24, temperature=0.0, eos_token_id=None)
    tokens = generation.completion_ids[0].tolist()
    pieces = [tokenizer.decode([t]) for t in tokens]
    plain = [p.isascii() and p.isprintable() and p != "" for p in pieces]
    start = next(i for i in range(len(tokens) - 3) if all(plain[i : i + 4]))
    stop = "".join(pieces[start : start + 4])[1:-1]  # a stop string that cuts through token boundaries
    texts, stopped = sample_text(
        model,
        tokenizer,
        ["ROMEO:", f"KING {stop}"],
        24,
        temperature=0.0,
        eos_token_id=None,
        stop_strings=[stop],
    )
    assert texts[0] == free[0][: free[0].index(stop)] and bool(stopped.finished[0])
    kept = stopped.completion_ids[0][stopped.completion_mask[0]]
    assert tokens[: len(kept)] == kept.tolist()
    assert stop in tokenizer.decode(kept) and stop not in tokenizer.decode(
        kept[:-1]
    )  # ends where it completes
    alone = sample_text(model, tokenizer, [f"KING {stop}"], 24, temperature=0.0, eos_token_id=None)[0][0]
    assert (
        texts[1] == alone[: alone.find(stop)] if stop in alone else alone
    )  # the prompt's copy is not matched
    with pytest.raises(LitlabError, match="tokenizer"):
        sample(model, torch.tensor([[5, 6]]), stop_strings=["x"])


def test_top_k_and_top_p_filter_the_sampling_distribution(tiny_lm: Callable) -> None:
    model = tiny_lm("causal")  # near-uniform next-token distribution over 600 ids
    prompt = torch.full((3000, 1), 5)
    drawn = generate(model, prompt, max_new_tokens=1, do_sample=True, seed=0)[:, 1]
    assert len(drawn.unique()) > 400  # transformers' default top-50 filter would allow at most 50
    top = generate(model, prompt, max_new_tokens=1, do_sample=True, top_k=10, seed=0)[:, 1]
    assert len(top.unique()) <= 10
    with torch.no_grad():
        probs = model(input_ids=prompt[:1]).logits[0, -1].softmax(-1)
    nucleus = generate(model, prompt, max_new_tokens=1, do_sample=True, top_p=0.1, seed=0)[:, 1]
    ranked = probs.argsort(descending=True)
    size = int((probs[ranked].cumsum(0) < 0.1).sum()) + 1  # the smallest set with mass ≥ 0.1
    assert set(nucleus.tolist()) <= set(ranked[:size].tolist()) and len(nucleus.unique()) > size // 2


def test_token_logprobs_match_log_softmax_and_zero_padding(peaky: Callable) -> None:
    model = peaky()
    ids, mask = pad_sequences([[4, 9, 33, 7, 100], [8, 21]], pad_id=1)
    logprobs = token_logprobs(model, ids, mask)
    with torch.no_grad():
        reference = model(input_ids=ids[:1]).logits[0, :-1].log_softmax(-1)
    assert torch.allclose(logprobs[0], reference[torch.arange(4), ids[0, 1:]], atol=1e-5)
    assert (logprobs[1, 1:] == 0).all()
    logprobs.sum().backward()  # gradients flow for policy-gradient losses
    assert model.lm_head.weight.grad is not None


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
    for prompt in ("ROMEO:", "KING", "To be", "A horse", "First Citizen"):  # a greedy text that re-encodes
        greedy = generate_text(model, tokenizer, [prompt], max_new_tokens=4, eos_token_id=None)[0]
        ids = generate(model, torch.tensor([tokenizer.encode(prompt)]), max_new_tokens=4)[0, -4:]
        if tokenizer.encode(greedy) == ids.tolist():
            break
    assert tokenizer.encode(greedy) == ids.tolist()
    assert bool(score_continuations(model, tokenizer, [prompt], [greedy])["greedy"][0])
    assert not bool(score_continuations(model, tokenizer, [prompt], [greedy + " x"])["greedy"][0])


def test_causal_only_functions_refuse_a_diffusion_model(
    peaky: Callable, tokenizer: PreTrainedTokenizerBase
) -> None:
    """The issue's defect: these accepted a masked-diffusion model and returned meaningless numbers."""
    model, ids = peaky("masked_diffusion"), torch.tensor([[5, 6, 7]])
    calls = [
        lambda: token_logprobs(model, ids),
        lambda: sample(model, ids),
        lambda: generate_text(model, tokenizer, ["ROMEO:"]),
        lambda: score_continuations(model, tokenizer, ["a"], ["b"]),
        lambda: DecodeState.prefill(model, ids),
        lambda: multiple_choice(model, tokenizer, ["a"], [["b", "c"]], [0]),
        lambda: exact_match(model, tokenizer, ["a"], ["b"]),
    ]
    for call in calls:
        with pytest.raises(LitlabError, match="needs a causal LM, got a masked-diffusion model"):
            call()
