"""DISCo against exact and lazy greedy at 10^5 and 10^6 documents: queries per second and coverage.

Planted corpora (``litlab.datamodules.retrieval``, 4-12 tokens of dimension 32 per document, queries of
32 tokens from 3 gold documents), K = 10. Every method runs on the same queries in one process, one
thread, interleaved per query; latency is CPU time per query (the machine is shared) with wall time
beside it. Target (issue 25): >= 100x lazy greedy at >= 0.95 coverage at 10^6 documents.

    python benchmarks/disco_scaling.py                      # 1e5 and 1e6 documents
    python benchmarks/disco_scaling.py --sizes 100000 --queries 8 --out /tmp/disco.json
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import torch

from litlab.core.machine import machine_info
from litlab.datamodules.retrieval import PlantedConfig, planted_corpus
from litlab.methods.disco.evaluate import SearchSettings, evaluate, exact_methods
from litlab.methods.disco.index import DiscoIndex
from litlab.methods.disco.ivf import faiss_available

OUT = Path(__file__).parent / "results" / "disco_scaling.json"


def run_size(n_docs: int, n_queries: int, nlist: int | None, settings: SearchSettings, seed: int) -> dict:
    config = PlantedConfig(
        n_docs=n_docs,
        dim=32,
        min_tokens=4,
        max_tokens=12,
        n_concepts=8192,
        n_queries=n_queries,
        query_tokens=32,
        seed=seed,
    )
    start = time.perf_counter()
    corpus = planted_corpus(config, cache=False)
    generate_s = time.perf_counter() - start
    cpu, wall = time.process_time(), time.perf_counter()
    index = DiscoIndex.build(corpus.doc_vectors, corpus.doc_offsets, nlist=nlist, replicas=8, seed=seed)
    build = {"build_cpu_s": time.process_time() - cpu, "build_wall_s": time.perf_counter() - wall}
    exact = exact_methods(corpus, k=10)
    kw = settings.kwargs()
    methods = {
        "exact_greedy": exact["exact_greedy"],
        "lazy_greedy": exact["lazy_greedy"],
        "disco": lambda i, q: index.search(q, 10, **kw),
        "maxsim_topk": lambda i, q: index.maxsim_topk(q, 10, **kw),
    }
    rows = evaluate(corpus, methods)
    by = {r["method"]: r for r in rows}
    for r in rows:
        r["qps"] = 1e3 / r["ms_per_query"]
    lazy_ratio = by["lazy_greedy"]["ms_per_query"] / by["disco"]["ms_per_query"]
    return {
        "n_docs": corpus.n_docs,
        "n_tokens": len(corpus.doc_vectors),
        "dim": corpus.dim,
        "n_queries": n_queries,
        "nlist": index.config["nlist"],
        "index_mb": index.nbytes() / 2**20,
        "corpus_mb": corpus.doc_vectors.numel() * 4 / 2**20,
        "generate_s": generate_s,
        **build,
        "speedup_vs_exact": by["disco"]["speedup"],
        "speedup_vs_lazy": lazy_ratio,
        "disco_coverage_ratio": by["disco"]["coverage_ratio"],
        "target_100x_lazy_at_095": bool(lazy_ratio >= 100 and by["disco"]["coverage_ratio"] >= 0.95),
        "methods": rows,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--queries", type=int, default=16)
    parser.add_argument("--nlist", type=int, nargs="+", default=[2048, 4096], help="one per size (or one)")
    parser.add_argument("--nprobe", type=int, default=2)
    parser.add_argument("--k-tokens", type=int, default=16)
    parser.add_argument("--pool", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    torch.set_num_threads(1)
    settings = SearchSettings(nprobe=args.nprobe, k_tokens=args.k_tokens, pool=args.pool)
    nlists = args.nlist if len(args.nlist) == len(args.sizes) else args.nlist[:1] * len(args.sizes)
    load_before = os.getloadavg()
    results = []
    for n_docs, nlist in zip(args.sizes, nlists):
        result = run_size(n_docs, args.queries, nlist, settings, args.seed)
        results.append(result)
        print(
            f"{result['n_docs']} docs, {result['n_tokens']} tokens: DISCo "
            f"{result['speedup_vs_exact']:.0f}x exact, {result['speedup_vs_lazy']:.0f}x lazy greedy, "
            f"coverage {result['disco_coverage_ratio']:.4f}",
            flush=True,
        )
    payload = {
        "benchmark": "disco_scaling",
        "machine": machine_info(),
        "faiss": faiss_available(),
        "threads": torch.get_num_threads(),
        "load_average_before": load_before,
        "load_average_after": os.getloadavg(),
        "settings": {"k": 10, "replicas": 8, **settings.kwargs()},
        "sizes": results,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(payload, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
