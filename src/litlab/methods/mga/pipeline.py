"""The MGA pipeline: genre–audience pairs per document → one rewrite per pair → the limited-consistency
filter → a corpus with provenance (source id, genre, audience) and per-stage counts. Each stage's outputs
are appended to ``<folder>/stages/<stage>.jsonl`` as they come, so a rerun resumes where a run stopped."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from litlab.core.errors import ConfigError
from litlab.core.jsonl_store import run_stage
from litlab.methods.mga.consistency import judge, value_vocabulary


def _write_jsonl(path: Path, records: Sequence[Mapping[str, Any]]) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text("".join(json.dumps(r) + "\n" for r in records))
    tmp.replace(path)


def run_pipeline(
    documents: Sequence[Mapping[str, Any]],
    backends: Mapping[str, Any],
    folder: Path,
    n_pairs: int = 5,
    batch_size: int = 16,
    consistency: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Run or resume over ``documents`` (each ``{"id", "text"}``, procedural ones also ``name``, ``kind``,
    ``facts``); writes ``corpus.jsonl`` (kept rewrites), ``rejected.jsonl`` and ``counts.json`` in
    ``folder`` and returns ``{"corpus", "rejected", "counts"}``."""
    ids = [str(d["id"]) for d in documents]
    if len(set(ids)) != len(ids):
        raise ConfigError("document ids must be unique (they key resuming and provenance)")
    stages = folder / "stages"
    items = [{**d, "key": str(d["id"])} for d in documents]
    pairs = run_stage(
        lambda batch: backends["pairs"].run("pairs", batch),
        items,
        stages / "pairs.jsonl",
        batch_size,
        "mga: genre–audience pairs",
    )
    jobs = [
        {**item, "key": f"{item['key']}#{index}", "pair": pair, "source_id": item["key"]}
        for item, found in zip(items, pairs, strict=True)
        for index, pair in enumerate(found or ())
    ]
    rewrites = run_stage(
        lambda batch: backends["rewrite"].run("rewrite", batch),
        jobs,
        stages / "rewrite.jsonl",
        batch_size,
        "mga: reformulation",
    )
    vocabulary = value_vocabulary(documents)
    corpus, rejected = [], []
    for job, text in zip(jobs, rewrites, strict=True):
        if text is None:
            continue
        verdict = judge(text, job, vocabulary, **(consistency or {}))
        record = {
            "id": job["key"],
            "source_id": job["source_id"],
            "genre": job["pair"]["genre"],
            "audience": job["pair"]["audience"],
            "text": text,
            **{k: verdict[k] for k in ("recall", "contradicted", "overlap")},
        }
        if verdict["keep"]:
            corpus.append(record)
        else:
            rejected.append(
                record | {"why": [k for k in ("copy", "lost_facts", "contradicted") if verdict[k]]}
            )
    counts = {
        "documents": len(documents),
        "pairs_unparseable": sum(found is None for found in pairs),
        "pairs_short": sum(found is not None and len(found) < n_pairs for found in pairs),
        "pairs": len(jobs),
        "rewrites_unparseable": sum(text is None for text in rewrites),
        "rewrites": sum(text is not None for text in rewrites),
        "rejected_copy": sum("copy" in r["why"] for r in rejected),
        "rejected_lost_facts": sum("lost_facts" in r["why"] for r in rejected),
        "rejected_contradiction": sum("contradicted" in r["why"] for r in rejected),
        "kept": len(corpus),
        "source_words": sum(len(d["text"].split()) for d in documents),
        "kept_words": sum(len(r["text"].split()) for r in corpus),
    }
    folder.mkdir(parents=True, exist_ok=True)
    _write_jsonl(folder / "corpus.jsonl", corpus)
    _write_jsonl(folder / "rejected.jsonl", rejected)
    (folder / "counts.json").write_text(json.dumps(counts, indent=1) + "\n")
    return {"corpus": corpus, "rejected": rejected, "counts": counts}
