"""Throughput of the MGA pipeline with the rule backend against a plain loop that makes the same rewrites.

- pipeline: ``run_pipeline`` (genre–audience pairs, one rewrite per pair, the limited-consistency filter,
  every stage output appended to its resumable JSONL store, corpus/rejected/counts written), 20 % noise.
- plain: the same backend's pairs and rewrites in a Python loop, nothing judged or stored (the floor).
- filter: the limited-consistency judge alone, rewrites judged per second.

Process CPU time on one thread (median of --repeats). Run:  python benchmarks/mga_pipeline.py
Writes benchmarks/results/mga_pipeline.json.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import torch

from litlab.core.machine import machine_info
from litlab.core.timing import median_cpu_seconds
from litlab.methods.mga.consistency import judge, value_vocabulary
from litlab.methods.mga.pipeline import run_pipeline
from litlab.methods.mga.stages import RuleBackend
from litlab.methods.mga.tasks import fact_documents

RESULTS = Path(__file__).resolve().parent / "results"


def plain(documents: list[dict], backend: RuleBackend) -> list[str]:
    """Pairs and rewrites of every document, nothing judged or stored."""
    texts = []
    for document in documents:
        item = {**document, "key": document["id"]}
        for index, pair in enumerate(backend.pairs(item)):
            texts.append(backend.rewrite({**item, "key": f"{item['key']}#{index}", "pair": pair}))
    return texts


def pipeline(documents: list[dict], backend: RuleBackend) -> dict:
    with tempfile.TemporaryDirectory() as folder:
        return run_pipeline(documents, dict.fromkeys(("pairs", "rewrite"), backend), Path(folder), 5, 64)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--documents", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(1)
    documents = fact_documents(args.documents, 0)
    backend = RuleBackend(n_pairs=5, noise=0.2, seed=0)
    t_pipeline, result = median_cpu_seconds(lambda: pipeline(documents, backend), args.repeats)
    t_plain, texts = median_cpu_seconds(lambda: plain(documents, backend), args.repeats)
    vocabulary = value_vocabulary(documents)
    sources = [d for d in documents for _ in range(5)]
    t_judge, _ = median_cpu_seconds(
        lambda: [judge(t, s, vocabulary) for t, s in zip(texts, sources)], args.repeats
    )
    counts = result["counts"]
    out = {
        "machine": machine_info(),
        "documents": len(documents),
        "rewrites": len(texts),
        "kept": counts["kept"],
        "pipeline_s": round(t_pipeline, 4),
        "plain_s": round(t_plain, 4),
        "judge_s": round(t_judge, 4),
        "pipeline_docs_per_s": round(len(documents) / t_pipeline, 1),
        "plain_docs_per_s": round(len(documents) / t_plain, 1),
        "judge_rewrites_per_s": round(len(texts) / t_judge, 1),
        "pipeline_overhead_x": round(t_pipeline / t_plain, 2),
        "same_rewrites": sorted(texts)
        == sorted([r["text"] for r in result["corpus"]] + [r["text"] for r in result["rejected"]]),
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "mga_pipeline.json").write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
