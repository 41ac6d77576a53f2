"""Speed and agreement of the pipeline's two global filters against brute force, on QA texts of the
procedural crawl with planted near-duplicates and evaluation items.

- dedup: MinHash (128 permutations) + LSH banding (``datasketch``) vs exact Jaccard of every pair of word
  3-gram sets (the peer: what the MinHash approximates), both keeping the first of each near-duplicate
  group at Jaccard ≥ 0.8; agreement = recall and precision of the flagged set against the exact one.
- decontamination: the sparse (train × n-gram) · (n-gram × eval) product vs a Python loop over every
  (train, eval) pair of n-gram sets; the coverages must be equal.

Process CPU time on one thread (median of --repeats). Run:  python benchmarks/webscale_rl_filters.py
Writes benchmarks/results/webscale_rl_filters.json.
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

import numpy as np
import torch

from litlab.core.machine import machine_info
from litlab.core.timing import median_cpu_seconds
from litlab.datamodules.webscale_rl import make_entities, question
from litlab.methods.webscale_rl.decontam import eval_coverage
from litlab.methods.webscale_rl.dedup import near_duplicates
from litlab.methods.webscale_rl.text import ngrams

RESULTS = Path(__file__).resolve().parent / "results"


def qa_texts(n_entities: int, seed: int = 0) -> tuple[list[str], list[str]]:
    """Every fact of ``n_entities`` as a QA text, 10 % re-posted with one word appended; the evaluation set
    is each entity's last fact, a fifth of them also planted verbatim among the training texts."""
    rng = random.Random(seed)
    entities = make_entities(n_entities, seed)
    texts = [f"{question(e.name, e.kind, n)} {v}" for e in entities for n, v in e.facts]
    texts += [f"{t} repost" for t in rng.sample(texts, len(texts) // 10)]
    evaluation = [f"{question(e.name, e.kind, e.facts[-1][0])} {e.facts[-1][1]}" for e in entities]
    texts += evaluation[::5]
    rng.shuffle(texts)
    return texts, evaluation


def exact_duplicates(texts: list[str], threshold: float) -> np.ndarray:
    sets = [ngrams(t, 3) for t in texts]
    flagged = np.zeros(len(texts), dtype=bool)
    for i in range(len(texts)):
        flagged[i] = any(len(sets[i] & sets[j]) / len(sets[i] | sets[j]) >= threshold for j in range(i))
    return flagged


def loop_coverage(train: list[str], evaluation: list[str], n: int = 5) -> np.ndarray:
    eval_sets = [ngrams(e, n) for e in evaluation]
    return np.array([max(len(ngrams(t, n) & e) / len(e) for e in eval_sets) for t in train])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--entities", type=int, default=400)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(1)
    texts, evaluation = qa_texts(args.entities)
    t_lsh, lsh = median_cpu_seconds(lambda: near_duplicates(texts, threshold=0.8), args.repeats)
    t_exact, exact = median_cpu_seconds(lambda: exact_duplicates(texts, 0.8), 1)
    t_sparse, (sparse_cov, _) = median_cpu_seconds(lambda: eval_coverage(texts, evaluation, 5), args.repeats)
    t_loop, loop_cov = median_cpu_seconds(lambda: loop_coverage(texts, evaluation, 5), 1)
    both = int((lsh & exact).sum())
    result = {
        "machine": machine_info(),
        "n_texts": len(texts),
        "n_eval": len(evaluation),
        "dedup": {
            "minhash_lsh_s": round(t_lsh, 4),
            "exact_pairs_s": round(t_exact, 4),
            "speedup": round(t_exact / t_lsh, 1),
            "flagged_exact": int(exact.sum()),
            "flagged_minhash": int(lsh.sum()),
            "recall": round(both / max(int(exact.sum()), 1), 4),
            "precision": round(both / max(int(lsh.sum()), 1), 4),
        },
        "decontamination": {
            "sparse_product_s": round(t_sparse, 4),
            "pair_loop_s": round(t_loop, 4),
            "speedup": round(t_loop / t_sparse, 1),
            "max_abs_difference": float(np.abs(sparse_cov - loop_cov).max()),
            "flagged_at_0.8": int((sparse_cov >= 0.8).sum()),
        },
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "webscale_rl_filters.json").write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
