"""The pipeline: provenance maps every output to its source and pair; the filter rejects exactly the rule
backend's planted faults; a run killed mid-stage resumes without losing or repeating an item; the task
runs."""

from __future__ import annotations

import json
import random
from collections import Counter
from pathlib import Path

import pytest

from litlab.core.errors import ConfigError, LitlabError
from litlab.methods.mga.pipeline import run_pipeline
from litlab.methods.mga.stages import RuleBackend, _seed
from litlab.methods.mga.tasks import fact_documents, reformulate_task
from litlab.task import TaskContext

DOCS = fact_documents(24, seed=2)


class Counting:
    """The rule backend, recording every key it is asked and failing once after ``fail_after`` batches."""

    def __init__(self, fail_after: int | None = None, noise: float = 0.2) -> None:
        self.rules, self.asked, self.fail_after, self.name = (
            RuleBackend(noise=noise),
            [],
            fail_after,
            "counting",
        )

    def run(self, stage: str, items: list) -> list:
        if self.fail_after is not None and len(self.asked) >= self.fail_after:
            self.fail_after = None
            raise LitlabError("endpoint went away")
        self.asked.extend((stage, item["key"]) for item in items)
        return self.rules.run(stage, items)


def _backends(backend: object) -> dict:
    return {"pairs": backend, "rewrite": backend}


def test_provenance_maps_every_output_to_its_source_and_pair(tmp_path: Path) -> None:
    result = run_pipeline(DOCS, _backends(RuleBackend(noise=0.2)), tmp_path, batch_size=5)
    pairs = {
        json.loads(line)["key"]: json.loads(line)["out"]
        for line in (tmp_path / "stages" / "pairs.jsonl").read_text().splitlines()
    }
    by_id = {d["id"]: d for d in DOCS}
    outputs = result["corpus"] + result["rejected"]
    assert len(outputs) == result["counts"]["pairs"] == 5 * len(DOCS)
    for record in outputs:
        source, index = record["id"].split("#")
        assert source == record["source_id"] and source in by_id
        pair = pairs[source][int(index)]
        assert (record["genre"], record["audience"]) == (pair["genre"], pair["audience"])
        assert by_id[source]["name"] in record["text"]
    on_disk = [json.loads(line) for line in (tmp_path / "corpus.jsonl").read_text().splitlines()]
    assert on_disk == result["corpus"]
    assert json.loads((tmp_path / "counts.json").read_text()) == result["counts"]


def test_the_filter_rejects_exactly_the_planted_faults(tmp_path: Path) -> None:
    result = run_pipeline(DOCS, _backends(RuleBackend(noise=0.3)), tmp_path)
    planted = set()
    for record in result["corpus"] + result["rejected"]:
        rng = random.Random(_seed("0", record["id"]))
        if rng.random() < 0.3:
            planted.add(record["id"])
    assert planted and {r["id"] for r in result["rejected"]} == planted
    counts = result["counts"]
    assert counts["kept"] + len(planted) == counts["rewrites"]


def test_a_run_killed_mid_stage_resumes_without_losing_or_repeating(tmp_path: Path) -> None:
    reference = run_pipeline(DOCS, _backends(RuleBackend(noise=0.2)), tmp_path / "reference", batch_size=4)
    backend = Counting(fail_after=24 + 40)  # every pair, then 10 rewrite batches, then a failure
    with pytest.raises(LitlabError, match="went away"):
        run_pipeline(DOCS, _backends(backend), tmp_path / "run", batch_size=4)
    with open(tmp_path / "run" / "stages" / "rewrite.jsonl", "a") as handle:
        handle.write('{"key": "e00019#2", "out": "cut sho')  # a line cut short by the kill
    result = run_pipeline(DOCS, _backends(backend), tmp_path / "run", batch_size=4)
    counts = Counter(backend.asked)
    assert max(counts.values()) == 1  # nothing asked twice
    assert sum(stage == "pairs" for stage, _ in counts) == len(DOCS)
    assert sum(stage == "rewrite" for stage, _ in counts) == 5 * len(DOCS)
    assert result == reference
    again = run_pipeline(DOCS, _backends(backend), tmp_path / "run", batch_size=4)
    assert again == reference and len(backend.asked) == sum(counts.values())  # a finished run asks nothing


def test_the_task_writes_a_corpus_and_counts(tmp_path: Path) -> None:
    ctx = TaskContext.local(tmp_path)
    backend = {"kind": "rules", "rules": {"noise": 0.2, "seed": 0}}
    out = reformulate_task(ctx, n_documents=9, backend=backend, batch_size=8)
    metrics = out["metrics"]
    assert metrics["documents"] == 9 and metrics["pairs"] == 45 and metrics["kept"] <= 45
    assert metrics["word_expansion"] > 1 and (tmp_path / "mga" / "corpus.jsonl").exists()
    with pytest.raises(ConfigError, match="unknown stages"):
        reformulate_task(ctx, backend=backend, stage_backends={"judge": {"kind": "rules"}})
    with pytest.raises(ConfigError, match="base_url"):
        reformulate_task(ctx, backend={"kind": "openai"})
    (tmp_path / "docs.jsonl").write_text('{"id": "a", "text": "Plain text."}\n')
    with pytest.raises(ConfigError, match="carry facts"):
        reformulate_task(
            ctx, documents_file=str(tmp_path / "docs.jsonl"), backend=backend, work_dir=str(tmp_path / "w")
        )
