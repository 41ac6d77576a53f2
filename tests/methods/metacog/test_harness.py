"""The question bank, the games' bookkeeping, resumable runs and determinism under a seed."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from litlab.core.errors import ConfigError
from litlab.datamodules.metacog_questions import LABELS, make_questions
from litlab.methods.metacog.agents import SimulatedAgent, SimulatedBackend
from litlab.methods.metacog.backends import Query, Reply
from litlab.methods.metacog.games import (
    capabilities_queries,
    change_rates,
    delegate_outcomes,
    delegate_queries,
    load_prompts,
)
from litlab.methods.metacog.session import GameConfig, analyse, play
from litlab.methods.metacog.store import read_records, run_queries

SMALL = GameConfig(n_questions=120, history_len=10, n_trials=60, batch_size=16)


def test_questions_are_seeded_and_right() -> None:
    items = make_questions(300, seed=3)
    assert items == make_questions(300, seed=3) and items != make_questions(300, seed=4)
    for q in items:
        a, op, b = q["question"].removeprefix("What is ").removesuffix("?").split()
        value = int(a) + int(b) if op == "+" else int(a) * int(b)
        assert q["options"][q["answer"]] == str(value) and len(set(q["options"])) == 4
        assert len(a) == q["digits"] and q["length"] == len(q["question"])
    assert {q["digits"] for q in items} == {1, 2, 3, 4}


class Flaky:
    """A simulated subject whose endpoint fails on its ``fail_on``-th call."""

    def __init__(self, fail_on: int) -> None:
        self.inner, self.calls, self.fail_on, self.asked = (
            SimulatedBackend(SimulatedAgent("positive")),
            0,
            fail_on,
            [],
        )
        self.name = self.inner.name

    def complete(self, queries: Sequence[Query]) -> list[Reply]:
        self.calls += 1
        if self.calls == self.fail_on:
            raise ConnectionError("endpoint went away")
        self.asked += [q.key for q in queries]
        return self.inner.complete(queries)


def test_a_backend_that_fails_mid_run_resumes_without_losing_or_repeating_answers(tmp_path: Path) -> None:
    queries = capabilities_queries(make_questions(100, 0), load_prompts("capabilities"))
    clean = run_queries(SimulatedBackend(SimulatedAgent("positive")), queries, tmp_path / "clean.jsonl", 16)
    flaky = Flaky(fail_on=3)
    with pytest.raises(ConnectionError):
        run_queries(flaky, queries, tmp_path / "run.jsonl", 16)
    assert len(read_records(tmp_path / "run.jsonl")) == 32  # two batches stored before the failure
    with (tmp_path / "run.jsonl").open("a") as handle:  # a crash in the middle of a write
        handle.write('{"key": "cap/99", "kind": "ans')
    resumed = run_queries(flaky, queries, tmp_path / "run.jsonl", 16)
    lines = [json.loads(line) for line in (tmp_path / "run.jsonl").read_text().splitlines()]
    assert sorted(r["key"] for r in lines) == sorted(q.key for q in queries)  # each answer exactly once
    assert len(flaky.asked) == len(set(flaky.asked)) == 100  # nothing asked twice
    assert resumed == clean


def test_a_file_holding_only_a_cut_line_is_trimmed_before_appending(tmp_path: Path) -> None:
    queries = capabilities_queries(make_questions(3, 0), load_prompts("capabilities"))
    (tmp_path / "a.jsonl").write_text('{"key": "cap/0", "te')
    run_queries(SimulatedBackend(SimulatedAgent("random")), queries, tmp_path / "a.jsonl")
    assert sorted(read_records(tmp_path / "a.jsonl")) == ["cap/0", "cap/1", "cap/2"]


def test_damaged_lines_before_the_end_are_an_error(tmp_path: Path) -> None:
    (tmp_path / "a.jsonl").write_text('not json\n{"key": "x"}\n')
    with pytest.raises(Exception, match="damaged"):
        read_records(tmp_path / "a.jsonl")


def test_sessions_are_deterministic_under_a_seed(tmp_path: Path) -> None:
    runs = [
        play(SimulatedBackend(SimulatedAgent("negative", seed=s)), SMALL, tmp_path / f"{i}", seed=s)
        for i, s in enumerate((5, 5, 6))
    ]
    files = [(tmp_path / f"{i}" / "delegate.jsonl").read_text() for i in range(3)]
    assert files[0] == files[1] and files[0] != files[2]
    np.testing.assert_array_equal(runs[0]["trials"]["delegated"], runs[1]["trials"]["delegated"])


def test_unparseable_replies_are_counted_not_dropped(tmp_path: Path) -> None:
    played = play(SimulatedBackend(SimulatedAgent("random", garble=0.3)), SMALL, tmp_path, seed=0)
    summary = analyse(played, n_boot=0)["summary"]
    assert summary["capabilities_unparsed"] == int((~played["capabilities"]["parsed"]).sum()) > 20
    assert summary["delegate_trials"] == 2 * SMALL.n_trials and summary["delegate_unparsed"] > 20
    t = played["trials"]
    assert not t["team_correct"][~t["parsed"]].any()  # an unparseable reply scores as a wrong answer
    assert sum(r["unparsed"] for r in played["second_chance"]) > 0


def test_delegate_game_history_teammate_and_label_alternation() -> None:
    items = make_questions(40, 0)
    prompts = load_prompts("delegate")
    own = np.arange(10) % 2 == 0
    queries, mate = delegate_queries(items[:10], own, items[10:], 0.7, 1, prompts, decision_only=True)
    text = queries[0].messages[-1]["content"]
    assert text.count("Teammate's answer: correct") == 7 and text.count("Your answer: correct") == 5
    assert [q.meta["answer_label"] for q in queries[:4]] == ["1", "2", "1", "2"]
    assert all(q.messages[-1]["content"].startswith(text[:200]) for q in queries)  # one shared history
    records = [
        {"kind": "decision", "label": lab, "meta": q.meta} for q, lab in zip(queries[:4], "1122", strict=True)
    ]
    out = delegate_outcomes(records, items[10:14], np.array([True, True, False, False]))
    np.testing.assert_array_equal(out["delegated"], [False, True, True, False])
    np.testing.assert_array_equal(out["team_correct"], [True, mate[1], mate[2], False])
    with pytest.raises(ConfigError):
        delegate_queries(items[:10], own, items[10:], 1.5, 1, prompts)


def test_second_chance_change_rates_separate_self_anticipation(tmp_path: Path) -> None:
    rows = {}
    for anticipates in (True, False):
        agent = SimulatedAgent("positive", anticipates=anticipates, garble=0.0)
        played = play(SimulatedBackend(agent), SMALL, tmp_path / str(anticipates), seed=0)
        rows[anticipates] = {
            (r["earlier_answer"], r["follow_up"]): r["change_rate"] for r in played["second_chance"]
        }
    for anticipates in (True, False):
        assert rows[anticipates][("shown", "incorrect")] == 1.0  # it sees the answer to avoid
        assert rows[anticipates][("shown", "positive")] == rows[anticipates][("redacted", "neutral")] == 0.0
    assert rows[True][("redacted", "incorrect")] == 1.0 and rows[False][("redacted", "incorrect")] == 0.0
    assert change_rates([])[0]["trials"] == 0


def test_capabilities_prompt_shows_every_option() -> None:
    q = make_questions(1, 0)[0]
    content = capabilities_queries([q], load_prompts("capabilities"))[0].messages[-1]["content"]
    assert all(f"{label}) {option}" in content for label, option in zip(LABELS, q["options"], strict=True))


def test_play_task_tabulates_one_subject_and_refuses_incomplete_backends(tmp_path: Path) -> None:
    from litlab.methods.metacog.study import make_backend, play_task
    from litlab.task import TaskContext

    game = {"n_questions": 120, "history_len": 10, "n_trials": 60}
    out = play_task(TaskContext.local(tmp_path), backend="simulated", policy="positive", game=game, n_boot=20)
    rows = out["tables"]["regressions"]
    assert {(r["signal"], r["controls"]) for r in rows} == {
        (s, c) for s in ("own_max_prob", "own_correct", "own_entropy") for c in (True, False)
    }
    assert (tmp_path / "answers" / "second_chance.jsonl").is_file()
    metrics = out["metrics"]
    assert metrics["delegate_trials"] == 120
    assert metrics["p_delegate_when_delegating"] > metrics["p_delegate_when_answering"]
    with pytest.raises(ConfigError, match="base_url and model"):
        make_backend("openai", 0, model="m")
