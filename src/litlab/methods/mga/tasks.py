"""``litlab-run task=mga/reformulate``: MGA over procedural fact documents (or a JSONL corpus), resumable in
its run folder (or ``work_dir``), with the per-stage counts, the genre mix and examples."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from litlab.core.errors import ConfigError  # noqa: E402
from litlab.core.results import TaskOutput  # noqa: E402
from litlab.datamodules.text import make_entities  # noqa: E402
from litlab.methods.mga.pipeline import run_pipeline  # noqa: E402
from litlab.methods.mga.stages import STAGES, build_backend  # noqa: E402
from litlab.task import TaskContext  # noqa: E402


def fact_documents(n: int, seed: int) -> list[dict[str, Any]]:
    """Procedural entity documents in the base style, each with its facts (what the filter checks)."""
    return [
        {
            "id": f"e{i:05d}",
            "text": e.text,
            "name": e.name,
            "kind": e.kind,
            "facts": [list(f) for f in e.attributes],
        }
        for i, e in enumerate(make_entities(n, seed))
    ]


def read_documents(path: str | Path) -> list[dict[str, Any]]:
    """``{"id", "text"}`` records of a JSONL file (a missing id becomes the line number)."""
    path = Path(path)
    if not path.exists():
        raise ConfigError(f"{path} does not exist")
    records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    for number, record in enumerate(records):
        record.setdefault("id", f"line{number:07d}")
        if not isinstance(record.get("text"), str):
            raise ConfigError(f"{path}: record {number} has no text")
    return records


def choose_backends(backend: Mapping[str, Any], overrides: Mapping[str, Any], n_pairs: int) -> dict[str, Any]:
    """One backend per stage: ``backend.kind`` (its options in ``backend.<kind>``), ``overrides.<stage>.kind``
    switching one stage; stages with the same spec share one backend."""
    if unknown := set(overrides) - set(STAGES):
        raise ConfigError(f"stage_backends names unknown stages {sorted(unknown)}; stages are {list(STAGES)}")
    built: dict[str, Any] = {}
    chosen = {}
    for stage in STAGES:
        kind = (overrides.get(stage) or {}).get("kind", backend.get("kind", "rules"))
        if kind not in built:
            built[kind] = build_backend(kind, n_pairs=n_pairs, **dict(backend.get(kind) or {}))
        chosen[stage] = built[kind]
    return chosen


def _genre_figure(corpus: list[dict[str, Any]]) -> plt.Figure:
    genres = Counter(r["genre"] for r in corpus)
    figure, axes = plt.subplots(figsize=(6, 3))
    axes.barh(list(genres), list(genres.values()), color="tab:green")
    axes.set_xlabel("kept rewrites")
    figure.tight_layout()
    return figure


def reformulate_task(
    ctx: TaskContext,
    *,
    n_documents: int = 200,
    seed: int = 0,
    documents_file: str | None = None,
    n_pairs: int = 5,
    backend: Mapping[str, Any],
    stage_backends: Mapping[str, Any] | None = None,
    batch_size: int = 16,
    work_dir: str | None = None,
    consistency: Mapping[str, Any] | None = None,
) -> TaskOutput:
    """Run or resume MGA; metrics are the per-stage counts and the token expansion (kept / source words)."""
    if n_pairs < 1:
        raise ConfigError(f"n_pairs must be at least 1, got {n_pairs}")
    documents = read_documents(documents_file) if documents_file else fact_documents(n_documents, seed)
    backends = choose_backends(backend, stage_backends or {}, n_pairs)
    folder = Path(work_dir) if work_dir else ctx.output_dir / "mga"
    result = run_pipeline(documents, backends, folder, n_pairs, batch_size, consistency)
    counts, corpus = result["counts"], result["corpus"]
    expansion = counts["kept_words"] / max(counts["source_words"], 1)
    rows = [
        {"stage": "documents", "count": counts["documents"]},
        {"stage": "pairs (unparseable replies)", "count": counts["pairs_unparseable"]},
        {"stage": "pairs", "count": counts["pairs"]},
        {"stage": "rewrites (unparseable)", "count": counts["rewrites_unparseable"]},
        {"stage": "rejected: near-copy", "count": counts["rejected_copy"]},
        {"stage": "rejected: < min recall", "count": counts["rejected_lost_facts"]},
        {"stage": "rejected: contradiction", "count": counts["rejected_contradiction"]},
        {"stage": "kept", "count": counts["kept"]},
    ]
    return {
        "metrics": {**{k: float(v) for k, v in counts.items()}, "word_expansion": round(expansion, 3)},
        "tables": {
            "stage_counts": rows,
            "genre_audience": [
                {"genre": g, "audience": a, "kept": n}
                for (g, a), n in sorted(Counter((r["genre"], r["audience"]) for r in corpus).items())
            ],
            "examples": [
                {
                    **{k: r[k] for k in ("id", "source_id", "genre", "audience")},
                    "text": r["text"].replace("\n", " / "),
                }
                for r in corpus[:10]
            ],
        },
        "figures": {"genres": _genre_figure(corpus)},
    }
