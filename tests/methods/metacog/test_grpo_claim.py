"""What GRPO on the Delegate Game does to a tiny LM, on unseen questions (bank seed 0).

The format-trained LM of the study's seed 10 (cached by config; a cold cache retrains it, bit-identical on
this machine: one CPU thread) never delegates greedily (P(T) about 0.1). Forty GRPO steps with the study's
settings (G = 8, 16 prompts a step, lr 3e-4, expected team correctness the reward) make it delegate on the
game's prompts while it keeps answering the capabilities test with a letter. Measured: here (seed 10;
5 min 41 s at load 9 on a warm cache, 2 min 17 s at load 7-9 on a cold one) delegation 0.0 before and 1.0
after at teammate accuracy 0.1 and 0.9 alike, capabilities replies all letters; in the study
(results/metacog/grpo_study/, seeds 10 and 11: independently trained models) delegation 1.0 at 0.1, 0.5
and 0.9 on both, capabilities replies letters on 300/300 and 276/300. Margins (0.1, 0.8) are set from that
spread. Not robust to the GRPO settings: with lr 1e-3 and 8 prompts a step the seed-10 model went to
answering "B" on every game prompt instead (delegation 0.0). It does not learn to read the teammate's record
at this scale (it delegates after a 0-of-2 history, where answering pays more, as after a 2-of-2 one).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from litlab.datamodules.metacog_questions import LABELS, make_questions
from litlab.lm import generate_text, render_chat
from litlab.methods.metacog.games import capabilities_queries, load_prompts
from litlab.methods.metacog.grpo_game import CHOICES, game_records
from litlab.methods.metacog.grpo_study import grpo_train, own_correctness, sft_subject, training_rows
from litlab.methods.metacog.local import LocalLMBackend
from litlab.methods.metacog.parsing import parse_label
from litlab.task import TaskContext

CONFIG = Path(__file__).parents[3] / "configs" / "task" / "metacog" / "grpo_study.yaml"


def _choices(lm: torch.nn.Module, tokenizer: object, messages: list) -> np.ndarray:
    prompts = [render_chat(tokenizer, m, add_generation_prompt=True) for m in messages]
    return np.array([parse_label(t, CHOICES) for t in generate_text(lm, tokenizer, prompts, 2)], dtype=object)


@pytest.fixture(scope="module")
def subjects(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    cfg = yaml.safe_load(CONFIG.read_text())
    ctx = TaskContext.local(tmp_path_factory.mktemp("grpo"))
    lm, tokenizer = sft_subject(
        ctx, cfg["data"], cfg["game_format"], 10, cfg["sft_steps"], cfg["lr"], cfg["arch"]
    )
    items = make_questions(200, 0, cfg["data"]["max_digits"])
    own = own_correctness(LocalLMBackend(lm, tokenizer), items)
    held_out = game_records(items, own, [0.1, 0.9], 2, 40, seed=99)
    caps = capabilities_queries(items[:80], load_prompts("capabilities"))
    before = {"game": _choices(lm, tokenizer, [r["messages"] for r in held_out])}
    train = cfg["train_game"]
    bank = make_questions(train["n_questions"], train["question_seed"], cfg["data"]["max_digits"])
    rows = training_rows(lm, tokenizer, bank, cfg["train_game"], seed=10)
    policy, _ = grpo_train(ctx, lm, tokenizer, rows, steps=40, batch_size=16, seed=10, options=cfg["grpo"])
    after = {"game": _choices(policy, tokenizer, [r["messages"] for r in held_out])}
    after["caps"] = _choices(policy, tokenizer, [q.messages for q in caps])
    mate = np.array([r["teammate_accuracy"] for r in held_out])
    return {"before": before, "after": after, "mate": mate}


@pytest.mark.slow
def test_grpo_teaches_delegating_on_the_game_and_keeps_the_answers(subjects: dict) -> None:
    before, after, mate = subjects["before"], subjects["after"], subjects["mate"]
    assert (before["game"] == "T").mean() < 0.1  # measured: 0.0
    assert np.isin(after["caps"], LABELS).mean() > 0.8  # still answers the test with a letter (measured: 1.0)
    for accuracy in (0.1, 0.9):  # measured: 1.0 at both (no reading of the teammate's record)
        assert (after["game"][mate == accuracy] == "T").mean() > 0.8
