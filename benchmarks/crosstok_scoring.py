"""Student tokens scored per second in the subset case: the exact cover algorithm against brute-force
marginalisation over canonical teacher sequences and against byte-level scoring, at several vocabularies.

- cover: ``CrossTokenizerScorer.score_sequence`` (incremental covers, one teacher forward per student
  token) on a shakespeare passage in the student's tokenization.
- brute force: ``BruteForce.next_logprobs`` for every prefix of the passage's first student tokens (one
  full teacher forward per search node from BOS; the same distributions, checked to agree here). Its
  cost grows with the prefix (every segmentation of it into d(t) pieces), so its rate is over the first
  ``n_brute`` prefixes only, and the per-length costs are recorded.
- byte level: the same passage scored byte by byte (a 0-merge student through the cover algorithm), the
  text's student tokens divided by the time: what scoring through bytes costs per student token.

Teacher BPEs of 300, 512 and 1024 ids trained on tinyshakespeare; students keep a quarter of the merges;
a seeded random 2 × d64 LLaMA teacher (speed does not depend on its training). Process CPU time on one
thread (a shared machine's load hardly moves it), the median of ``--repeats``.

Run:  python benchmarks/crosstok_scoring.py [--quick]
Writes benchmarks/results/crosstok_scoring[_quick].json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

import torch

from litlab.core.machine import machine_info
from litlab.datamodules.text import text_file
from litlab.datamodules.tokenizers import cached_bpe, subset_tokenizer
from litlab.lm.models import build_lm, llama_config
from litlab.methods.crosstok.brute import BruteForce
from litlab.methods.crosstok.cover import CrossTokenizerScorer
from litlab.methods.crosstok.pair import SubsetPair

RESULTS = Path(__file__).resolve().parent / "results"
PASSAGE = slice(600_000, 601_200)


def cpu_seconds(fn) -> float:
    start = time.process_time()
    fn()
    return time.process_time() - start


def measure(vocab: int, text: str, corpus: str, n_tokens: int, n_brute: int, repeats: int) -> dict:
    """Tokens per second of the three ways of scoring at one vocabulary size."""
    teacher = cached_bpe([corpus], vocab)
    merges = (vocab - 259) // 4
    pair = SubsetPair(teacher, subset_tokenizer(teacher, merges))
    byte_pair = SubsetPair(teacher, subset_tokenizer(teacher, 0))
    torch.manual_seed(0)
    model = build_lm(llama_config(vocab, hidden_size=64, num_layers=2, num_heads=2), "causal").eval()
    ids = pair.student.encode(text, add_special_tokens=False)[:n_tokens]
    scored = pair.student.decode(ids)
    byte_ids = byte_pair.student.encode(scored, add_special_tokens=False)
    cover, brute = CrossTokenizerScorer(model, pair), BruteForce(model, pair)
    byte_scorer = CrossTokenizerScorer(model, byte_pair)
    times = {"cover": [], "brute": [], "bytes": []}
    for _ in range(repeats):
        cover._masks.clear()
        byte_scorer._masks.clear()
        times["cover"].append(cpu_seconds(lambda: cover.score_sequence(ids)))
        times["bytes"].append(cpu_seconds(lambda: byte_scorer.score_sequence(byte_ids)))
        times["brute"].append(cpu_seconds(lambda: [brute.next_logprobs(ids[:i]) for i in range(n_brute)]))
    by_length = []
    for i in range(n_brute):
        calls = brute.teacher_calls
        seconds = cpu_seconds(lambda i=i: brute.next_logprobs(ids[:i]))
        by_length.append(
            {"prefix_tokens": i, "cpu_seconds": seconds, "teacher_calls": brute.teacher_calls - calls}
        )
    state, worst = cover.start(), 0.0
    for i, s in enumerate(ids[:n_brute]):
        expected, _ = brute.next_logprobs(ids[:i])
        worst = max(worst, float((cover.next_logprobs(state).exp() - expected.exp()).abs().max()))
        state = cover.advance(state, s)
    median = {k: statistics.median(v) for k, v in times.items()}
    return {
        "teacher_vocab": vocab, "student_vocab": len(pair.student), "student_merges": merges,
        "student_tokens": len(ids), "teacher_tokens": len(teacher.encode(scored, add_special_tokens=False)),
        "bytes": len(byte_ids),
        "cover_tokens_per_s": len(ids) / median["cover"],
        "byte_level_student_tokens_per_s": len(ids) / median["bytes"],
        "brute_force_tokens_per_s": n_brute / median["brute"],
        "brute_force_prefixes": n_brute,
        "teacher_calls_per_token_cover": (1 + len(ids)) / len(ids),
        "max_abs_prob_diff_cover_vs_brute": worst,
        "brute_force_by_prefix_length": by_length,
        "cpu_seconds": median,
    }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one vocabulary, fewer tokens, one repeat")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(1)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    full = text_file("tinyshakespeare").read_text(encoding="utf-8")
    corpus, text = full[:500_000], full[PASSAGE]
    vocabs = [512] if args.quick else [300, 512, 1024]
    n_tokens, n_brute, repeats = (60, 8, 1) if args.quick else (200, 16, args.repeats)
    rows = [measure(v, text, corpus, n_tokens, n_brute, repeats) for v in vocabs]
    result = {
        "benchmark": "crosstok_scoring", **machine_info(), "load_average": os.getloadavg(), "rows": rows,
    }  # fmt: skip
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"crosstok_scoring{'_quick' if args.quick else ''}.json"
    path.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
