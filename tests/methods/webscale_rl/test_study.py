"""The RL study's bookkeeping on a tiny configuration: every arm starts from the pretrained model, token
counts grow, GRPO arms report rewards and all-tie shares, and the summary covers every arm."""

from __future__ import annotations

from pathlib import Path

import torch

from litlab.methods.webscale_rl.study import ARMS, majority_accuracy, rl_study
from litlab.task import TaskContext

TINY = {
    "n_entities": 10, "noise": 0.2, "vocab_size": 300,
    "arch": {"hidden_size": 32, "num_layers": 1, "num_heads": 2},
    "block_size": 32, "qa_length": 48, "batch_size": 4, "lr": 3e-3, "pretrain_steps": 4, "steps": 6,
    "sft_warmup_steps": 2, "eval_every": 2, "grpo_batch_size": 2,
    "grpo": {"group_size": 2, "max_new_tokens": 4, "temperature": 1.0, "lr": 1e-3},
}  # fmt: skip


def test_every_arm_is_tracked_from_the_pretrained_model(tmp_path: Path) -> None:
    torch.manual_seed(0)
    out = rl_study(TaskContext.local(tmp_path), seeds=[3], **TINY)
    curves = out["tables"]["curves"]
    assert {r["arm"] for r in out["tables"]["summary"]} == {*ARMS, "majority_answer"}
    starts = [next(r for r in curves if r["arm"] == arm) for arm in ARMS]
    assert all(
        s["tokens"] == 0 and (s["qa"], s["cloze"]) == (starts[0]["qa"], starts[0]["cloze"]) for s in starts
    )
    for arm in ARMS:
        tokens = [r["tokens"] for r in curves if r["arm"] == arm]
        assert tokens == sorted(tokens) and tokens[-1] > 0
    grpo = [r for r in curves if r["arm"].startswith("sft_grpo") and r.get("all_tie") is not None]
    assert grpo and all(0 <= r["all_tie"] <= 1 and 0 <= r["reward"] <= 1 for r in grpo)
    assert out["figures"]["accuracy_vs_tokens"] is not None


def test_the_majority_baseline_answers_each_attribute_with_its_most_frequent_value() -> None:
    qa = [
        {"question": "A is a town. What is the river of A?", "answer": "Vint"},
        {"question": "B is a town. What is the river of B?", "answer": "Vint"},
        {"question": "C is a town. What is the river of C?", "answer": "Mell"},
    ]
    held_out = [
        {"noun": "river", "answer": "Vint"},
        {"noun": "river", "answer": "Mell"},
        {"noun": "dish", "answer": "x"},
    ]
    assert majority_accuracy(qa, held_out) == 1 / 3
