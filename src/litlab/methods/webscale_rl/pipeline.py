"""The Webscale-RL data pipeline: documents → filter → domain + personas → one QA pair per persona (with
per-domain demonstrations) → checker (keep has_context = Y, answer_correctness = Y, info_leakage = N) →
near-duplicate removal → decontamination against the evaluation set.

Documents are processed in shards; every LLM stage of every shard is a resumable JSONL file
(``litlab.core.jsonl_store.run_stage``), and each finished shard writes a summary, so a killed run — or
shards run as separate jobs over one ``work_dir`` — continues where it stopped. The global steps (dedup,
decontamination) run once every shard is done and write ``qa.jsonl`` and ``counts.json``.
"""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from litlab.core.cache import write_text_atomic
from litlab.core.errors import ConfigError
from litlab.core.jsonl_store import run_stage
from litlab.core.progress import track
from litlab.methods.webscale_rl.decontam import contaminated
from litlab.methods.webscale_rl.dedup import near_duplicates
from litlab.methods.webscale_rl.prompts import DOMAIN_LIST
from litlab.methods.webscale_rl.stages import STAGES
from litlab.methods.webscale_rl.text import unit_hash

COUNT_KEYS = (
    "documents", "filter_unparseable", "filter_rejected", "qualified", "identify_unparseable",
    "domain_dropped", "identified", "qa_requested", "generate_unparseable", "qa_generated",
    "check_unparseable", "no_context", "incorrect", "leakage", "checked",
)  # fmt: skip


class StageBackend(Protocol):
    name: str

    def run(self, stage: str, items: Sequence[dict[str, Any]]) -> list[dict[str, Any] | None]: ...


def slug(domain: str) -> str:
    """A domain's file name in a demonstration folder (``Tech & Engineering`` → ``tech_engineering``)."""
    return re.sub(r"[^a-z]+", "_", domain.lower()).strip("_")


def load_demonstrations(folder: str | os.PathLike) -> dict[str, list[dict[str, str]]]:
    """A per-domain demonstration library: ``<slug(domain)>.jsonl`` files of ``{question, answer}``."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ConfigError(f"demonstrations folder {folder} does not exist")
    library = {}
    for domain in DOMAIN_LIST:
        path = folder / f"{slug(domain)}.jsonl"
        if path.exists():
            library[domain] = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return library


def pick_demonstrations(library: Mapping[str, list], domain: str, k: int, key: str) -> list[dict[str, str]]:
    """``k`` demonstrations of ``domain``, chosen by a hash of the item key (reproducible on resume)."""
    pool = library.get(domain, [])
    return sorted(pool, key=lambda d: unit_hash(key, d["question"]))[:k]


def process_shard(
    index: int,
    documents: Sequence[dict[str, Any]],
    backends: Mapping[str, StageBackend],
    work_dir: Path,
    demonstrations: Mapping[str, list] | None = None,
    few_shot: int = 2,
    checker: bool = True,
    batch_size: int = 32,
) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """The four LLM stages on one shard: the checked QA pairs and the shard's counts."""

    def stage(name: str, items: list[dict[str, Any]]) -> list[Any]:
        path = work_dir / "stages" / name / f"shard{index:05d}.jsonl"
        return run_stage(lambda batch: backends[name].run(name, batch), items, path, batch_size, name)

    counts = Counter({key: 0 for key in COUNT_KEYS})
    counts["documents"] = len(documents)
    verdicts = stage("filter", [{"key": d["id"], "text": d["text"]} for d in documents])
    counts["filter_unparseable"] = sum(v is None for v in verdicts)
    kept = [d for d, v in zip(documents, verdicts, strict=True) if v and v["qualified"]]
    counts["qualified"] = len(kept)
    counts["filter_rejected"] = len(documents) - len(kept) - counts["filter_unparseable"]

    labels = stage("identify", [{"key": d["id"], "text": d["text"]} for d in kept])
    counts["identify_unparseable"] = sum(v is None for v in labels)
    identified = [
        (d, v)
        for d, v in zip(kept, labels, strict=True)
        if v and v["domain"] in DOMAIN_LIST and v["personas"]
    ]
    counts["identified"] = len(identified)
    counts["domain_dropped"] = len(kept) - len(identified) - counts["identify_unparseable"]

    requests = []
    for d, v in identified:
        for k, persona in enumerate(v["personas"][:3]):
            key = f"{d['id']}/{k}"
            examples = pick_demonstrations(demonstrations or {}, v["domain"], few_shot, key)
            requests.append(
                {"key": key, "doc": d["id"], "text": d["text"], "domain": v["domain"], "persona": persona}
                | {"examples": examples}
            )
    counts["qa_requested"] = len(requests)
    generated = stage("generate", requests)
    counts["generate_unparseable"] = sum(g is None for g in generated)
    pairs = [r | g for r, g in zip(requests, generated, strict=True) if g]
    counts["qa_generated"] = len(pairs)

    if checker:
        checks = stage("check", [{k: p[k] for k in ("key", "text", "question", "answer")} for p in pairs])
        counts["check_unparseable"] = sum(c is None for c in checks)
        for name, bad in (("no_context", False), ("incorrect", False), ("leakage", True)):
            label = {
                "no_context": "has_context",
                "incorrect": "answer_correctness",
                "leakage": "info_leakage",
            }[name]
            counts[name] = sum(c is not None and c[label] == bad for c in checks)
        good = [
            c is not None and c["has_context"] and c["answer_correctness"] and not c["info_leakage"]
            for c in checks
        ]
        pairs = [p for p, ok in zip(pairs, good, strict=True) if ok]
    counts["checked"] = len(pairs)
    fields = ("key", "doc", "domain", "persona", "question", "answer")
    return [{f: p[f] for f in fields} for p in pairs], dict(counts)


def run_pipeline(
    documents: Sequence[dict[str, Any]],
    evaluation: Sequence[dict[str, Any]],
    backends: Mapping[str, StageBackend],
    work_dir: str | os.PathLike,
    shard_size: int = 64,
    shards: Sequence[int] | None = None,
    demonstrations: Mapping[str, list] | None = None,
    few_shot: int = 2,
    checker: bool = True,
    batch_size: int = 32,
    dedup: Mapping[str, Any] | None = None,
    decontam: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Run (or resume) the pipeline; returns ``{"complete", "qa", "counts", "pending"}``. ``shards`` limits
    this call to some shard indices (parallel jobs); the global steps run when no shard is pending."""
    if shard_size < 1:
        raise ConfigError(f"shard_size must be ≥ 1, got {shard_size}")
    if missing := set(STAGES) - set(backends):
        raise ConfigError(f"no backend for stages {sorted(missing)}")
    work_dir = Path(work_dir)
    n_shards = max(1, -(-len(documents) // shard_size))
    chosen = range(n_shards) if shards is None else [int(s) for s in shards]
    if bad := [s for s in chosen if not 0 <= s < n_shards]:
        raise ConfigError(f"shards {bad} out of range: {len(documents)} documents make {n_shards} shards")
    for index in track(chosen, "webscale_rl shards"):
        summary = work_dir / "shards" / f"shard{index:05d}.json"
        if summary.exists():
            continue
        part = documents[index * shard_size : (index + 1) * shard_size]
        qa, counts = process_shard(
            index, part, backends, work_dir, demonstrations, few_shot, checker, batch_size
        )
        write_text_atomic(summary, json.dumps({"qa": qa, "counts": counts}))
    pending = [i for i in range(n_shards) if not (work_dir / "shards" / f"shard{i:05d}.json").exists()]
    if pending:
        return {"complete": False, "qa": [], "counts": {}, "pending": pending}

    summaries = [
        json.loads((work_dir / "shards" / f"shard{i:05d}.json").read_text()) for i in range(n_shards)
    ]
    qa = [pair for s in summaries for pair in s["qa"]]
    counts = Counter()
    for s in summaries:
        counts.update(s["counts"])
    texts = [f"{p['question']} {p['answer']}" for p in qa]
    duplicate = near_duplicates(texts, **dict(dedup or {})) if qa else []
    qa = [p for p, dup in zip(qa, duplicate, strict=True) if not dup]
    counts["deduplicated"] = len(qa)
    eval_texts = [f"{e['question']} {e['answer']}" for e in evaluation]
    dirty = contaminated([f"{p['question']} {p['answer']}" for p in qa], eval_texts, **dict(decontam or {}))
    qa = [p for p, bad in zip(qa, dirty, strict=True) if not bad]
    counts["decontaminated"] = len(qa)
    write_text_atomic(work_dir / "qa.jsonl", "".join(json.dumps(p) + "\n" for p in qa))
    write_text_atomic(work_dir / "counts.json", json.dumps(dict(counts), indent=1))
    return {"complete": True, "qa": qa, "counts": dict(counts), "pending": []}


def funnel_rows(counts: Mapping[str, int]) -> list[dict[str, Any]]:
    """The per-stage table: items in, items out and why the rest were dropped."""
    c = counts
    rows = [
        ("filter", "documents", "qualified",
         f"{c['filter_rejected']} rejected, {c['filter_unparseable']} unparseable"),
        ("identify", "qualified", "identified",
         f"{c['domain_dropped']} off-list domain or no persona, {c['identify_unparseable']} unparseable"),
        ("generate", "qa_requested", "qa_generated", f"{c['generate_unparseable']} unparseable"),
        ("check", "qa_generated", "checked",
         f"{c['no_context']} no context, {c['incorrect']} incorrect, {c['leakage']} leakage, "
         f"{c['check_unparseable']} unparseable (one pair may fail several)"),
        ("dedup", "checked", "deduplicated", "near-duplicates (MinHash LSH)"),
        ("decontaminate", "deduplicated", "decontaminated", "n-gram overlap with the evaluation set"),
    ]  # fmt: skip
    return [
        {"stage": s, "in": counts[i], "out": counts[o], "dropped": counts[i] - counts[o], "why": w}
        for s, i, o, w in rows
    ]
