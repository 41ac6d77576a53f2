"""The evaluation harness: every byte of a text scored once (also with a SentencePiece-style tokenizer),
bpb against a direct computation, the masked-diffusion bound path, multiple choice against brute-force
scoring, exact match against generation."""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest
import torch
from transformers import PreTrainedTokenizerBase

from litlab.datamodules.tokenizers import byte_counts, token_byte_lengths
from litlab.lm.evaluation import (
    evaluate_batches,
    evaluate_text,
    exact_match,
    multiple_choice,
    normalize_answer,
    text_windows,
)
from litlab.lm.generation import generate_text, score_continuations, token_logprobs
from litlab.lm.losses import diffusion_nll_terms
from litlab.lm.models import build_lm, llama_config
from tests.lm.local_tokenizers import sentencepiece_bpe

TEXT = "ROMEO: O, she doth teach the torches to burn bright! 日本"


@pytest.mark.parametrize("stride", [None, 2, 4])
def test_text_windows_label_every_token_exactly_once(stride: int | None) -> None:
    ids = list(range(10, 33))
    windows = text_windows(ids, bos_id=0, window=6, stride=stride, counts=[1] * len(ids))
    labels = windows["labels"][windows["labels"] != -100]
    assert sorted(labels.tolist()) == ids and int(windows["byte_counts"].sum()) == len(ids)
    tokens = [0, *ids]
    for row in range(len(windows["input_ids"])):  # each label sits after its true predecessors
        inside = windows["attention_mask"][row].bool()
        window_tokens = windows["input_ids"][row][inside].tolist()
        start = tokens.index(window_tokens[0])
        assert window_tokens == tokens[start : start + len(window_tokens)]
    if stride == 2:  # later windows predict 2 new tokens each with 4 of context
        assert (windows["labels"][1:] != -100).sum(1).tolist()[:-1] == [2] * (len(windows["labels"]) - 2)


def test_evaluate_text_equals_a_direct_computation(
    tiny_lm: Callable, tokenizer: PreTrainedTokenizerBase
) -> None:
    model = tiny_lm("causal", initializer_range=0.1)
    ids = tokenizer.encode(TEXT, add_special_tokens=False)
    direct = -token_logprobs(model, torch.tensor([[tokenizer.eos_token_id, *ids]])).sum().item()
    result = evaluate_text(model, tokenizer, TEXT, window=len(ids) + 1)
    assert result["bytes"] == len(TEXT.encode()) and result["tokens"] == len(ids)
    assert result["bpb"] == pytest.approx(direct / math.log(2) / len(TEXT.encode()), rel=1e-5)
    short = evaluate_text(model, tokenizer, TEXT, window=4)  # less context, same accounting
    assert short["bytes"] == result["bytes"] and short["tokens"] == result["tokens"]


def test_evaluate_text_counts_the_text_s_bytes_with_a_sentencepiece_tokenizer(shakespeare: str) -> None:
    """The issue's defect: a SentencePiece-style tokenizer's per-token table undercounts (no leading
    spaces), so bpb was divided by the wrong number of bytes."""
    sp = sentencepiece_bpe(shakespeare[:60_000])
    torch.manual_seed(0)
    model = build_lm(llama_config(len(sp), hidden_size=32, num_layers=1, num_heads=4)).eval()
    text = shakespeare[1000:1800]
    result = evaluate_text(model, sp, text, window=64)
    assert result["bytes"] == len(text.encode())
    ids = sp.encode(text, add_special_tokens=False)
    assert result["tokens"] == len(ids)
    assert int(byte_counts(sp, [text])[0].sum()) == len(text.encode())
    assert int(token_byte_lengths(sp)[ids].sum()) != len(text.encode())  # the table alone cannot be exact


def test_diffusion_models_are_scored_by_their_bound(
    tiny_lm: Callable, tokenizer: PreTrainedTokenizerBase
) -> None:
    """The issue's defect: evaluate_text scored a diffusion model as if it were causal (3.706 bpb)."""
    model = tiny_lm("masked_diffusion", initializer_range=0.1)
    result = evaluate_text(model, tokenizer, TEXT, window=8, n_draws=4, seed=3)
    ids = tokenizer.encode(TEXT, add_special_tokens=False)
    assert result["bytes"] == len(TEXT.encode()) and result["tokens"] == len(ids)
    assert result == evaluate_text(model, tokenizer, TEXT, window=8, n_draws=4, seed=3)  # seeded
    windows = text_windows(ids, tokenizer.eos_token_id, 8)
    generator = torch.Generator().manual_seed(3)
    with torch.no_grad():
        direct = diffusion_nll_terms(model, windows, token_byte_lengths(tokenizer), 2, 4, generator)
    assert result["loss"] == pytest.approx(float(direct.nll) / len(ids), rel=1e-6)
    causal_reading = evaluate_batches(
        tiny_lm("causal", initializer_range=0.1), [windows], token_byte_lengths(tokenizer)
    )
    assert causal_reading["loss"] != pytest.approx(result["loss"], rel=1e-3)


def test_multiple_choice_picks_the_best_scored_option(
    tiny_lm: Callable, tokenizer: PreTrainedTokenizerBase
) -> None:
    model = tiny_lm("causal", initializer_range=0.3)
    prompts = ["Q: 2 + 2?\nA:", "The king is"]
    choices = [[" 4", " 5", " fish"], [" dead", " alive"]]
    result = multiple_choice(model, tokenizer, prompts, choices, answers=[0, 1], normalize="byte")
    for prompt, options, prediction, scores in zip(prompts, choices, result["predictions"], result["scores"]):
        direct = score_continuations(model, tokenizer, [prompt] * len(options), options)
        per_byte = direct["logprob"] / direct["n_bytes"]
        assert prediction == int(per_byte.argmax()) and scores == pytest.approx(per_byte.tolist(), abs=1e-5)
    assert result["accuracy"] == sum(p == a for p, a in zip(result["predictions"], [0, 1])) / 2


def test_exact_match_compares_normalized_greedy_answers(
    tiny_lm: Callable, tokenizer: PreTrainedTokenizerBase
) -> None:
    model = tiny_lm("causal", initializer_range=0.3)
    prompts = ["Q: What is 2 + 2?\nA:", "ROMEO:"]
    greedy = generate_text(model, tokenizer, prompts, 5)
    result = exact_match(
        model, tokenizer, prompts, [greedy[0] + "\nmore", "certainly not this"], max_new_tokens=5
    )
    assert result["predictions"] == greedy
    assert result["correct"] == [True, normalize_answer(greedy[1]) == "certainly not this"]
    assert normalize_answer("  Paris.\nextra") == "paris"
