"""``litlab-run task=webscale_rl/pipeline``: the pipeline over the procedural crawl (or a JSONL corpus)
with per-stage backends, resumable in its run folder (or ``work_dir``), with the per-stage counts."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from litlab.core.errors import ConfigError  # noqa: E402
from litlab.core.results import TaskOutput  # noqa: E402
from litlab.datamodules.webscale_rl import DOMAINS, make_corpus, make_entities, question  # noqa: E402
from litlab.methods.webscale_rl.pipeline import funnel_rows, load_demonstrations, run_pipeline  # noqa: E402
from litlab.methods.webscale_rl.stages import STAGES, build_backend  # noqa: E402
from litlab.task import TaskContext  # noqa: E402


def procedural_demonstrations(seed: int, per_domain: int = 8) -> dict[str, list[dict[str, str]]]:
    """A per-domain demonstration library written from entities of another seed (never in the corpus)."""
    entities = make_entities(per_domain * len(DOMAINS), seed + 10_000)
    library: dict[str, list[dict[str, str]]] = {d.name: [] for d in DOMAINS}
    for e in entities:
        noun, value = e.facts[0]
        library[e.domain].append({"question": question(e.name, e.kind, noun), "answer": value})
    return library


def read_jsonl(path: str | Path, fields: Sequence[str]) -> list[dict[str, Any]]:
    """Records of a JSONL file, each required to hold ``fields`` (a missing id becomes the line number)."""
    path = Path(path)
    if not path.exists():
        raise ConfigError(f"{path} does not exist")
    records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    for number, record in enumerate(records):
        record.setdefault("id", f"line{number:07d}")
        if missing := [f for f in fields if f not in record]:
            raise ConfigError(f"{path}: record {number} lacks {missing}")
    return records


def backend_spec(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """A stage's backend: ``override`` (a stage's entry) over ``base`` (``task.backend``), option blocks
    merged key by key; returns ``{"kind", "options"}`` with the options of the chosen kind only."""
    merged = {**base}
    for key, value in override.items():
        merged[key] = {**(base.get(key) or {}), **value} if isinstance(value, Mapping) else value
    kind = merged.get("kind", "rules")
    return {"kind": kind, "options": dict(merged.get(kind) or {})}


def funnel_figure(rows: list[dict[str, Any]]) -> plt.Figure:
    figure, axes = plt.subplots(figsize=(6, 3))
    axes.barh([r["stage"] for r in rows][::-1], [r["out"] for r in rows][::-1], color="tab:blue")
    axes.set_xlabel("kept after the stage (documents for filter, identify; QA pairs after)")
    figure.tight_layout()
    return figure


def pipeline_task(
    ctx: TaskContext,
    *,
    corpus: Mapping[str, Any],
    documents_file: str | None = None,
    eval_file: str | None = None,
    backend: Mapping[str, Any],
    stage_backends: Mapping[str, Mapping[str, Any]] | None = None,
    demonstrations_dir: str | None = None,
    few_shot: int = 2,
    checker: bool = True,
    shard_size: int = 64,
    batch_size: int = 32,
    shards: list[int] | None = None,
    work_dir: str | None = None,
    dedup: Mapping[str, Any] | None = None,
    decontam: Mapping[str, Any] | None = None,
) -> TaskOutput:
    """Run or resume the pipeline; metrics are the per-stage counts (and ``complete`` = 1 when every shard
    and the global steps are done)."""
    procedural = make_corpus(**corpus)
    documents = read_jsonl(documents_file, ["text"]) if documents_file else procedural["documents"]
    evaluation = read_jsonl(eval_file, ["question", "answer"]) if eval_file else procedural["eval"]
    if unknown := set(stage_backends or {}) - set(STAGES):
        raise ConfigError(f"stage_backends names unknown stages {sorted(unknown)}; stages are {list(STAGES)}")
    specs = {s: backend_spec(backend, (stage_backends or {}).get(s) or {}) for s in STAGES}
    built: dict[str, Any] = {}
    for spec in specs.values():
        key = json.dumps(spec, sort_keys=True)
        if key not in built:
            built[key] = build_backend(spec["kind"], **spec["options"])
    backends = {s: built[json.dumps(spec, sort_keys=True)] for s, spec in specs.items()}
    library = (
        load_demonstrations(demonstrations_dir)
        if demonstrations_dir
        else procedural_demonstrations(corpus.get("seed", 0))
    )
    folder = Path(work_dir) if work_dir else ctx.output_dir / "pipeline"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "eval.jsonl").write_text("".join(json.dumps(e) + "\n" for e in evaluation))
    result = run_pipeline(
        documents, evaluation, backends, folder, shard_size, shards, library, few_shot, checker, batch_size,
        dedup, decontam,
    )  # fmt: skip
    if not result["complete"]:
        return {"metrics": {"complete": 0.0, "pending_shards": float(len(result["pending"]))}}
    counts, qa = result["counts"], result["qa"]
    rows = funnel_rows(counts)
    domains = Counter(p["domain"] for p in qa)
    return {
        "metrics": {"complete": 1.0, **{k: float(v) for k, v in counts.items()}},
        "tables": {
            "stage_counts": rows,
            "domains": [{"domain": d, "qa_pairs": n} for d, n in sorted(domains.items())],
            "examples": [
                {k: p[k] for k in ("key", "domain", "persona", "question", "answer")} for p in qa[:12]
            ],
        },
        "figures": {"funnel": funnel_figure(rows)},
    }
