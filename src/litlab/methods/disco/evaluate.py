"""Run subset retrievers on a corpus and score them: coverage ratio F(S)/F(S_greedy), Jaccard with the
greedy set, gold recall and MAP, milliseconds per query.

Latency is the CPU time of each single-threaded query (``time.process_time``): the machine these numbers
come from is shared, and CPU time is what an idle core's wall clock would show; wall time is reported
beside it (``wall_ms``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import torch

from litlab.datamodules.retrieval import TokenCorpus
from litlab.methods.disco.index import DiscoIndex
from litlab.methods.disco.objective import (
    average_precision,
    coverage,
    greedy,
    jaccard,
    lazy_greedy,
    maxsim_rows,
    stochastic_greedy,
)

# A retriever: (query index, query token vectors (m, d)) -> the selected document ids.
Retriever = Callable[[int, torch.Tensor], list[int]]
REFERENCE = "exact_greedy"


@dataclass(frozen=True)
class SearchSettings:
    """DISCo's search knobs (see :meth:`DiscoIndex.search`)."""

    nprobe: int = 2
    k_tokens: int | None = 16
    pool: int = 8

    def kwargs(self) -> dict[str, Any]:
        return {"nprobe": self.nprobe, "k_tokens": self.k_tokens, "pool": self.pool}


def exact_methods(corpus: TokenCorpus, k: int, epsilon: float = 0.1) -> dict[str, Retriever]:
    """Exact greedy, lazy greedy (both score every document: one full MaxSim pass) and stochastic greedy."""

    def rows(q: torch.Tensor, docs: torch.Tensor | None = None) -> torch.Tensor:
        return maxsim_rows(
            corpus.doc_vectors, corpus.doc_offsets, torch.nn.functional.normalize(q, dim=-1), docs
        )

    return {
        REFERENCE: lambda i, q: greedy(rows(q), k),
        "lazy_greedy": lambda i, q: lazy_greedy(rows(q), k),
        "stochastic_greedy": lambda i, q: stochastic_greedy(
            lambda d: rows(q, d), corpus.n_docs, len(q), k, epsilon, seed=i
        ),
    }


def index_methods(
    index: DiscoIndex,
    k: int,
    settings: SearchSettings,
    unlifted: DiscoIndex | None = None,
    replicas: tuple[int, ...] = (),
) -> dict[str, Retriever]:
    """DISCo, its ablations (no query editing, no rerank, no lifting when ``unlifted`` is given), DISCo
    with the first r replicas for each r in ``replicas``, and PLAID-style top-K MaxSim on the same IVF."""
    kw = settings.kwargs()
    methods: dict[str, Retriever] = {
        "disco": lambda i, q: index.search(q, k, **kw),
        "disco_no_editing": lambda i, q: index.search(q, k, query_editing=False, **kw),
        "disco_no_rerank": lambda i, q: index.search(q, k, rerank=False, **kw),
        "maxsim_topk": lambda i, q: index.maxsim_topk(q, k, **kw),
    }
    if unlifted is not None:
        methods["disco_no_lifting"] = lambda i, q: unlifted.search(q, k, **kw)
    for r in replicas:
        methods[f"disco_R{r}"] = lambda i, q, r=r: index.search(q, k, replicas=r, **kw)
    return methods


def run_methods(
    corpus: TokenCorpus, methods: Mapping[str, Retriever], queries: range | None = None, repeats: int = 1
) -> tuple[dict[str, list[list[int]]], dict[str, list[float]]]:
    """Each method's selection, CPU and wall milliseconds for every query (``millis[name]`` and
    ``millis[name + ":wall"]``); methods are interleaved per query, so load changes hit all alike. With
    ``repeats`` > 1 every method runs each query that many times in rounds and the fastest time is kept
    (timeit's rule: other processes only add time)."""
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    queries = range(corpus.n_queries) if queries is None else queries
    selections: dict[str, list[list[int]]] = {name: [] for name in methods}
    millis: dict[str, list[float]] = {key: [] for name in methods for key in (name, f"{name}:wall")}
    with torch.no_grad():
        for i in queries:
            q = corpus.query(i)
            cpu_ms: dict[str, list[float]] = {name: [] for name in methods}
            wall_ms: dict[str, list[float]] = {name: [] for name in methods}
            for round_ in range(repeats):  # rounds over all methods: no method re-runs on its own warm cache
                for name, method in methods.items():
                    cpu, wall = time.process_time(), time.perf_counter()
                    chosen = method(i, q)
                    cpu_ms[name].append(1e3 * (time.process_time() - cpu))
                    wall_ms[name].append(1e3 * (time.perf_counter() - wall))
                    if round_ == 0:
                        selections[name].append(chosen)
            for name in methods:
                millis[name].append(min(cpu_ms[name]))
                millis[f"{name}:wall"].append(min(wall_ms[name]))
    return selections, millis


def score_methods(
    corpus: TokenCorpus,
    selections: Mapping[str, list[list[int]]],
    millis: Mapping[str, list[float]],
    queries: range | None = None,
    reference: str = REFERENCE,
) -> list[dict[str, Any]]:
    """One row per method: mean coverage ratio to ``reference`` (and its minimum), Jaccard with its set
    and with its first |gold| picks (where the gains are large), gold recall, MAP, mean and median CPU ms
    per query, mean wall ms, and the CPU speed-up over the reference."""
    queries = range(corpus.n_queries) if queries is None else queries
    ref_ms = torch.tensor(millis[reference]).mean()
    rows = []
    for name, chosen in selections.items():
        ratio, jac, jac_prefix, recall, ap = [], [], [], [], []
        for j, i in enumerate(queries):
            q = torch.nn.functional.normalize(corpus.query(i), dim=-1)
            value = coverage(maxsim_rows(corpus.doc_vectors, corpus.doc_offsets, q, torch.tensor(chosen[j])))
            best = coverage(
                maxsim_rows(corpus.doc_vectors, corpus.doc_offsets, q, torch.tensor(selections[reference][j]))
            )
            gold = corpus.gold_set(i)
            ratio.append(value / best)
            jac.append(jaccard(chosen[j], selections[reference][j]))
            g = len(gold)
            jac_prefix.append(jaccard(chosen[j][:g], selections[reference][j][:g]))
            recall.append(len(set(gold) & set(chosen[j])) / max(1, len(gold)))
            ap.append(average_precision(chosen[j], gold))
        ms = torch.tensor(millis[name])
        rows.append(
            {
                "method": name,
                "coverage_ratio": float(torch.tensor(ratio).mean()),
                "coverage_ratio_min": float(torch.tensor(ratio).min()),
                "jaccard": float(torch.tensor(jac).mean()),
                "jaccard_prefix": float(torch.tensor(jac_prefix).mean()),
                "gold_recall": float(torch.tensor(recall).mean()),
                "map": float(torch.tensor(ap).mean()),
                "ms_per_query": float(ms.mean()),
                "ms_median": float(ms.median()),
                "wall_ms": float(torch.tensor(millis[f"{name}:wall"]).mean()),
                "speedup": float(ref_ms / ms.mean()),
            }
        )
    return rows


def evaluate(
    corpus: TokenCorpus, methods: Mapping[str, Retriever], queries: range | None = None, repeats: int = 1
) -> list[dict[str, Any]]:
    """:func:`run_methods` then :func:`score_methods`."""
    selections, millis = run_methods(corpus, methods, queries, repeats)
    return score_methods(corpus, selections, millis, queries)
