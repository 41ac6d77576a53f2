"""The pipeline end to end on the rule backend: a run killed mid-stage resumes without asking any item
twice or losing one, shards run as separate calls, and each global step removes what it should."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from litlab.core.errors import ConfigError
from litlab.datamodules.webscale_rl import make_corpus
from litlab.methods.webscale_rl.pipeline import run_pipeline
from litlab.methods.webscale_rl.stages import STAGES, RuleBackend, read_facts
from litlab.methods.webscale_rl.tasks import backend_spec, pipeline_task, procedural_demonstrations
from litlab.task import TaskContext

CORPUS = make_corpus(80, seed=11)


class Counting(RuleBackend):
    """The rule backend that counts the items it was asked, per stage, and raises on call ``fail_on``."""

    def __init__(self, fail_on: int | None = None) -> None:
        super().__init__(noise=0.2, seed=0)
        self.asked: Counter[str] = Counter()
        self.calls, self.fail_on = 0, fail_on

    def run(self, stage: str, items: Sequence[dict[str, Any]]) -> list[dict[str, Any] | None]:
        self.calls += 1
        if self.calls == self.fail_on:
            raise RuntimeError("killed")
        self.asked.update(f"{stage}:{item['key']}" for item in items)
        return super().run(stage, items)


def _run(backend: RuleBackend, folder: Path, **options: Any) -> dict[str, Any]:
    backends = dict.fromkeys(STAGES, backend)
    library = procedural_demonstrations(0)
    return run_pipeline(
        CORPUS["documents"], CORPUS["eval"], backends, folder, shard_size=16, batch_size=8,
        demonstrations=library, **options,
    )  # fmt: skip


@pytest.fixture(scope="module")
def clean(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], Counting]:
    backend = Counting()
    return _run(backend, tmp_path_factory.mktemp("clean")), backend


@pytest.mark.parametrize("fail_on", [3, 17, 30])
def test_a_run_killed_mid_stage_resumes_without_repeating_or_losing_items(
    tmp_path: Path, clean: tuple, fail_on: int
) -> None:
    first, second = Counting(fail_on), Counting()
    with pytest.raises(RuntimeError, match="killed"):
        _run(first, tmp_path)
    result = _run(second, tmp_path)
    assert result["qa"] == clean[0]["qa"] and result["counts"] == clean[0]["counts"]
    assert not set(first.asked) & set(second.asked)
    assert first.asked + second.asked == clean[1].asked


def test_a_line_cut_by_a_crash_is_asked_again(tmp_path: Path, clean: tuple) -> None:
    with pytest.raises(RuntimeError):
        _run(Counting(fail_on=10), tmp_path)
    stage_file = next((tmp_path / "stages").rglob("*.jsonl"))
    stage_file.write_text(stage_file.read_text()[:-7])
    assert _run(Counting(), tmp_path)["qa"] == clean[0]["qa"]
    keys = [json.loads(line)["key"] for line in stage_file.read_text().splitlines()]
    assert len(keys) == len(set(keys))


def test_shards_can_run_as_separate_calls(tmp_path: Path, clean: tuple) -> None:
    partial = _run(Counting(), tmp_path, shards=[0, 2])
    assert not partial["complete"] and partial["pending"] == [1, 3, 4, 5, 6]
    assert _run(Counting(), tmp_path, shards=[1, 3, 4, 5, 6])["qa"] == clean[0]["qa"]
    with pytest.raises(ConfigError, match="out of range"):
        _run(Counting(), tmp_path, shards=[7])


def test_dedup_removes_reposts_and_decontamination_exactly_the_held_out_facts(clean: tuple) -> None:
    result, _ = clean
    held_out = {(e["entity"], e["noun"]) for e in CORPUS["eval"]}
    docs = {d["id"]: d for d in CORPUS["documents"]}
    asked = [_asked(p, docs)[:2] for p in result["qa"]]
    assert not set(asked) & held_out
    assert len(set(asked)) == len(asked)  # a repost's pairs are the original's: none survives twice
    counts = result["counts"]
    assert counts["checked"] > counts["deduplicated"] > counts["decontaminated"] == len(result["qa"])


def _asked(pair: dict[str, Any], docs: dict[str, dict]) -> tuple[str, str, str]:
    """The document fact a question asks about (the noun named in the question)."""
    return next(f for f in read_facts(docs[pair["doc"]]["text"]) if f" {f[1]} of " in pair["question"])


def test_the_checker_ablation_keeps_the_spoiled_pairs(tmp_path: Path, clean: tuple) -> None:
    off = _run(RuleBackend(noise=0.2, seed=0), tmp_path, checker=False)
    counts, on = off["counts"], clean[0]["counts"]
    assert counts["checked"] == counts["qa_generated"] == on["qa_generated"] > on["checked"]
    assert on["qa_generated"] - on["checked"] == on["no_context"] + on["incorrect"] + on["leakage"]


def test_the_task_reports_per_stage_counts_and_refuses_unknown_stages(tmp_path: Path) -> None:
    options = {
        "corpus": {"n_entities": 40, "seed": 1},
        "backend": {"kind": "rules", "rules": {"noise": 0.2}, "openai": {"model": "m"}},
        "shard_size": 32,
    }
    out = pipeline_task(TaskContext.local(tmp_path), **options)
    rows = {r["stage"]: r for r in out["tables"]["stage_counts"]}
    assert list(rows) == ["filter", "identify", "generate", "check", "dedup", "decontaminate"]
    assert all(r["dropped"] == r["in"] - r["out"] >= 0 for r in rows.values())
    assert out["metrics"]["decontaminated"] == rows["decontaminate"]["out"] > 0
    assert (tmp_path / "pipeline" / "qa.jsonl").read_text().count("\n") == rows["decontaminate"]["out"]
    with pytest.raises(ConfigError, match="unknown stages"):
        pipeline_task(TaskContext.local(tmp_path), **options, stage_backends={"judge": {"kind": "rules"}})
    with pytest.raises(ConfigError, match="needs task.backend.openai.base_url"):
        pipeline_task(TaskContext.local(tmp_path), **options, stage_backends={"check": {"kind": "openai"}})


def test_a_stage_override_merges_over_the_shared_backend() -> None:
    base = {"kind": "rules", "rules": {"noise": 0.2}, "local": {"path": "a", "temperature": 0.0}}
    assert backend_spec(base, {}) == {"kind": "rules", "options": {"noise": 0.2}}
    spec = backend_spec(base, {"kind": "local", "local": {"temperature": 0.7}})
    assert spec == {"kind": "local", "options": {"path": "a", "temperature": 0.7}}
