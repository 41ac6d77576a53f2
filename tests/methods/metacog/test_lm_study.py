"""The tiny-LM study end to end at toy size: training through the Fitter, every game through the local
backend, the tables the README quotes."""

from __future__ import annotations

from pathlib import Path

from litlab.methods.metacog.lm_study import lm_study
from litlab.task import TaskContext


def test_lm_study_runs_every_game_on_a_trained_tiny_lm(tmp_path: Path) -> None:
    game = {
        "n_questions": 24,
        "history_len": 2,
        "n_trials": 8,
        "teammate_accuracies": [0.5],
        "max_second_chance": 3,
        "batch_size": 8,
    }
    data = {
        "n_questions": 200,
        "vocab_size": 300,
        "block_size": 64,
        "batch_size": 4,
        "cache_dir": str(tmp_path),
    }
    out = lm_study(
        TaskContext.local(tmp_path / "run"),
        seeds=[0],
        steps=3,
        lr=3e-3,
        n_boot=10,
        data=data,
        arch={"hidden_size": 16, "num_layers": 1, "num_heads": 2},
        game=game,
    )
    subjects = out["tables"]["subjects"][0]
    assert subjects["delegate_trials"] == 8 and 0 <= subjects["capabilities_unparsed"] <= 24
    answers = tmp_path / "run" / "answers" / "seed0"
    assert len((answers / "capabilities.jsonl").read_text().splitlines()) == 24
    assert len((answers / "delegate.jsonl").read_text().splitlines()) == 8
    assert {r["outcome"] for r in out["tables"]["signal"]} == {
        "own correctness (capabilities test)",
        "delegation (Delegate Game)",
    }
    assert set(out["metrics"]) >= {"capabilities_accuracy", "change_rate/redacted/incorrect"}
