"""The GRPO Delegate Game: documents in the format the backend renders, the team reward by hand, the training
trials, and the task end to end at toy size."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from litlab.datamodules.metacog_questions import make_questions, qa_document
from litlab.datamodules.tokenizers import train_bpe, wrap_tokenizer
from litlab.lm import render_chat
from litlab.methods.metacog.grpo_game import chat_document, format_corpus_file, game_records, team_reward
from litlab.methods.metacog.grpo_study import grpo_study
from litlab.task import TaskContext


def test_game_documents_are_the_conversation_the_backend_renders() -> None:
    items = make_questions(6, 0)
    tokenizer = wrap_tokenizer(train_bpe([qa_document(q) for q in items], 300))
    record = game_records(items, np.zeros(6, dtype=bool), [0.5], 2, 1, seed=0)[0]
    rendered = render_chat(tokenizer, [*record["messages"], {"role": "assistant", "content": "T"}])
    assert chat_document(record["messages"], "T") == rendered
    prompt = render_chat(tokenizer, record["messages"], add_generation_prompt=True)
    assert rendered.startswith(prompt)


def test_team_reward_by_hand() -> None:
    completions = ["T", "B", "C", "what?", " b.", "T"]
    answer = ["A", "B", "B", "B", "B", "A"]
    mate = [0.9, 0.9, 0.1, 0.5, 0.5, 0.0]  # the last one a capabilities prompt: delegating scores nothing
    rewards = team_reward([""] * 6, completions, answer=answer, teammate_accuracy=mate)
    assert rewards.tolist() == pytest.approx([0.9, 1.0, 0.0, 0.0, 1.0, 0.0])


def test_game_records_show_the_teammate_and_own_history() -> None:
    items = make_questions(40, 3)
    own = np.arange(40) % 2 == 0
    records = game_records(items, own, [0.1, 0.9], history_len=2, n_trials=5, seed=4)
    assert len(records) == 10 and records == game_records(items, own, [0.1, 0.9], 2, 5, seed=4)
    low, high = records[0]["messages"][-1]["content"], records[5]["messages"][-1]["content"]
    assert low.count("Teammate's answer: incorrect") == 2 and high.count("Teammate's answer: correct") == 2
    assert {r["teammate_accuracy"] for r in records} == {0.1, 0.9}
    assert all(r["answer"] in "ABCD" for r in records)


def test_format_documents_delegate_half_the_time_whatever_the_teammate(tmp_path: Path) -> None:
    path = format_corpus_file(100, 1, 4, 200, [0.1, 0.9], 2, root=str(tmp_path))
    docs = [json.loads(line)["text"] for line in path.read_text().splitlines()]
    games = [d for d in docs if "teammate" in d]
    assert len(docs) == 100 + 400 and len(games) == 400
    for accuracy_says in ("Teammate's answer: correct.", "Teammate's answer: incorrect."):
        group = [d for d in games if d.count(accuracy_says) == 2]
        share = np.mean([d.endswith("<|assistant|>\nT<|endoftext|>") for d in group])
        assert len(group) > 100 and 0.4 < share < 0.6  # the cold start carries no teammate information


def test_grpo_study_runs_end_to_end(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LITLAB_CACHE", str(tmp_path / "cache"))
    out = grpo_study(
        TaskContext.local(tmp_path / "run"),
        seeds=[0],
        sft_steps=3,
        lr=3e-3,
        arch={"hidden_size": 16, "num_layers": 1, "num_heads": 2},
        data={
            "n_questions": 100, "question_seed": 1, "max_digits": 2, "vocab_size": 300, "block_size": 64,
            "batch_size": 4, "cache_dir": str(tmp_path),
        },
        game_format={"n_game": 20, "accuracies": [0.1, 0.9], "history_len": 2},
        train_game={
            "n_questions": 30, "question_seed": 2, "accuracies": [0.1, 0.9], "history_len": 2, "n_trials": 4,
            "capabilities_share": 0.5,
        },
        grpo_steps=2,
        grpo_batch=4,
        grpo={"group_size": 2, "max_new_tokens": 2, "lr": 1e-3},
        game={
            "n_questions": 20, "question_seed": 0, "max_digits": 2, "history_len": 2, "n_trials": 6,
            "teammate_accuracies": [0.1, 0.9], "second_chance": False, "batch_size": 8,
        },
        n_boot=5,
    )  # fmt: skip
    arms = [r["arm"] for r in out["tables"]["subjects"]]
    assert arms == ["sft", "grpo"] and len(out["tables"]["grpo_curve"]) >= 1
    assert {"grpo/delegation_rate@0.1", "grpo/delegation_rate@0.9", "sft/team_score"} <= set(out["metrics"])
    assert (
        len((tmp_path / "run" / "answers" / "grpo-seed0" / "delegate.jsonl").read_text().splitlines()) == 12
    )
