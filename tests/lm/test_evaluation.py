"""The evaluation harness: every byte of a text scored once, bpb against a direct computation,
multiple choice against brute-force scoring, exact match against generation."""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest
import torch
from transformers import PreTrainedTokenizerBase

from litlab.lm.evaluation import evaluate_text, exact_match, multiple_choice, normalize_answer, text_windows
from litlab.lm.generation import generate_text, score_continuations, token_logprobs


def test_text_windows_label_every_token_exactly_once() -> None:
    ids = list(range(10, 33))
    windows = text_windows(ids, bos_id=0, window=6)
    labels = windows["labels"][windows["labels"] != -100]
    assert sorted(labels.tolist()) == ids
    assert (windows["input_ids"][windows["attention_mask"] == 1][:1] == 0).all()
    # each window's labelled tokens are preceded, inside the window, by their true predecessor
    for row in range(len(windows["input_ids"])):
        tokens = [0, *ids]
        for position in range(1, 6):
            label = int(windows["labels"][row, position])
            if label != -100:
                assert tokens[tokens.index(label) - 1] == int(windows["input_ids"][row, position - 1])


def test_evaluate_text_equals_a_direct_computation(
    tiny_lm: Callable, tokenizer: PreTrainedTokenizerBase
) -> None:
    model = tiny_lm("causal", initializer_range=0.1)
    text = "ROMEO: O, she doth teach the torches to burn bright! 日本"
    ids = tokenizer.encode(text, add_special_tokens=False)
    direct = -token_logprobs(model, torch.tensor([[tokenizer.eos_token_id, *ids]])).sum().item()
    result = evaluate_text(model, tokenizer, text, window=len(ids) + 1)
    assert result["bytes"] == len(text.encode()) and result["tokens"] == len(ids)
    assert result["bpb"] == pytest.approx(direct / math.log(2) / len(text.encode()), rel=1e-5)
    short = evaluate_text(model, tokenizer, text, window=4)  # less context, same accounting
    assert short["bytes"] == result["bytes"] and short["tokens"] == result["tokens"]


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
