"""The verifiable reward on pipeline QA, through the shared GRPO substrate's rollout and module."""

from __future__ import annotations

import pytest
import torch

from litlab.datamodules.tokenizers import train_bpe, wrap_tokenizer
from litlab.fitting import Fitter
from litlab.lm import GRPOModule, build_lm, grpo_rollout, llama_config, prompt_loader
from litlab.methods.webscale_rl.rl import exact_match_reward, prompt_records, qa_prompt

QA = [
    {"question": "Kalomi is a bird species. What is the diet of Kalomi?", "answer": "small fish"},
    {"question": "Renva is a mountain town. What is the population of Renva?", "answer": "1,213"},
]


def test_exact_match_reward_by_hand() -> None:
    completions = [" Small fish.\nQuestion: x", "small fish and more", " 1,213", "1213", ""]
    answers = ["small fish", "small fish", "1,213", "1,213", "x"]
    assert exact_match_reward([""] * 5, completions, answer=answers, extra=[0] * 5) == [
        1.0,
        0.0,
        1.0,
        0.0,
        0.0,
    ]
    assert prompt_records(QA)[1] == {"prompt": qa_prompt(QA[1]["question"]), "answer": "1,213"}
    assert qa_prompt("Q?") == "Question: Q?\nAnswer:"


@pytest.fixture(scope="module")
def tiny() -> tuple:
    torch.manual_seed(0)
    tokenizer = wrap_tokenizer(train_bpe([q["question"] + " " + q["answer"] for q in QA] * 5, 300))
    return build_lm(llama_config(len(tokenizer), hidden_size=32, num_layers=1, num_heads=2)), tokenizer


def test_the_rollout_scores_each_completion_against_its_prompts_answer(tiny: tuple) -> None:
    model, tokenizer = tiny
    records = prompt_records(QA)
    rollout = grpo_rollout(
        model, tokenizer, [r["prompt"] for r in records], 4, exact_match_reward,
        columns={"answer": [r["answer"] for r in records]}, max_new_tokens=4, seed=1,
    )  # fmt: skip
    assert rollout.rewards.shape == (2, 4)
    expected = exact_match_reward([], rollout.completions, answer=["small fish"] * 4 + ["1,213"] * 4)
    assert rollout.rewards.flatten().tolist() == expected


def test_groups_that_never_succeed_tie_and_leave_the_policy_unchanged(tiny: tuple) -> None:
    model, tokenizer = tiny
    module = GRPOModule(
        exact_match_reward, model=model, tokenizer=tokenizer, group_size=4, max_new_tokens=4, lr=1e-2
    )
    before = [p.detach().clone() for p in model.parameters()]
    Fitter().fit(module, prompt_loader(prompt_records(QA), batch_size=2), max_steps=2)
    assert module.rollout is not None and module.rollout.rewards.sum() == 0  # pass@G = 0: all groups tie
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))
