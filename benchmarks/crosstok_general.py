"""The general case's approximation error: the official fast approximation of next-student-token probabilities
against the lossless procedure, for students whose vocabularies are NOT subsets of the teacher's.

Teacher: the distillation study's trained teacher (512-id BPE, 2 x d64 LLaMA; cached, trained on first use).
Its exact next-byte distribution, restricted to the most frequent bytes of the training text and ended
``horizon`` bytes after each prefix, is a finite byte LM, so the lossless procedure is exact on it. Prefixes:
σ = S(w)[:k] for alphabet-only spans w of the test text (the gold next token S(w)[k] is a candidate, as in
distillation). Writes ``results/crosstok/general_approx.json``.

    python benchmarks/crosstok_general.py [--prefixes 12] [--horizon 4] [--alphabet-size 8]
"""

from __future__ import annotations

import argparse
import json
import random
import re
import statistics
import time
from pathlib import Path

import torch

from litlab.core.machine import machine_info
from litlab.datamodules.tokenizers import train_bpe, wrap_tokenizer
from litlab.methods.crosstok.data import DistillDataModule
from litlab.methods.crosstok.general import (
    Restricted,
    Student,
    TeacherBytes,
    approximate_next,
    lossless_next,
    total_variation,
)
from litlab.methods.crosstok.pair import check_subset_pair

OUT = Path(__file__).resolve().parents[1] / "results" / "crosstok" / "general_approx.json"


def spans(text: str, alphabet: bytes, n: int, seed: int) -> list[str]:
    """``n`` distinct alphabet-only spans of 6-14 characters that start a word, drawn from ``text``."""
    chars = re.escape(alphabet.decode())
    found = sorted({m.group(0).rstrip()[:14] for m in re.finditer(f"(?<= )[{chars}]{{6,}}", text)})
    return random.Random(seed).sample(found, min(n, len(found)))


def measure(teacher: TeacherBytes, student: Student, words: list[str], alphabet: bytes, horizon: int) -> dict:
    rng, rows = random.Random(0), []
    every = tuple(range(student.size))
    for w in words:
        ids = student.tokenizer.encode(w)
        if len(ids) < 2:
            continue
        k = rng.randrange(1, len(ids))
        sigma, gold = ids[:k], ids[k]
        lm = Restricted(teacher, alphabet, len(student.text(sigma)) + horizon)
        f0, t0 = teacher.scorer.teacher_calls, time.process_time()
        approx = approximate_next(
            lm, student, sigma, extra=(gold,)
        )  # first: its teacher states are not cached
        f1, t1 = teacher.scorer.teacher_calls, time.process_time()
        exact = lossless_next(lm, student, sigma)
        f2, t2 = teacher.scorer.teacher_calls, time.process_time()
        full = approximate_next(lm, student, sigma, extra=every)
        no_merge = approximate_next(lm, student, sigma, extra=every, merge_top=0)
        rows.append(
            {
                "prefix": student.text(sigma).decode(),
                "gold": student.tokenizer.convert_ids_to_tokens(gold),
                "tv_official": total_variation(exact.logprobs, approx),
                "lossless_mass_off_official_candidates": float(exact.logprobs.exp()[approx.isinf()].sum()),
                "official_candidates": int(torch.isfinite(approx).sum()),
                "tv_every_candidate": total_variation(exact.logprobs, full),
                "tv_every_candidate_no_merge_correction": total_variation(exact.logprobs, no_merge),
                "p_gold_lossless": float(exact.logprobs[gold].exp()),
                "p_gold_official": float(approx[gold].exp()),
                "lossless_prefix_mass": float(torch.tensor(exact.log_prefix).exp()),
                "unresolved": exact.unresolved,
                "byte_calls": exact.byte_calls,
                "teacher_forwards_official": f1 - f0,
                "teacher_forwards_lossless": f2 - f1,
                "cpu_s_official": t1 - t0,
                "cpu_s_lossless": t2 - t1,
            }
        )
    keys = [
        k
        for k in rows[0]
        if k.startswith(("tv_", "cpu_", "p_gold", "teacher_", "lossless_mass", "official_"))
    ] + ["byte_calls"]
    summary = {
        k: {
            "mean": statistics.fmean(r[k] for r in rows),
            "median": statistics.median(r[k] for r in rows),
            "max": max(r[k] for r in rows),
        }
        for k in keys
    }
    return {"student_ids": student.size, "prefixes": len(rows), "summary": summary, "rows": rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prefixes", type=int, default=12)
    parser.add_argument("--horizon", type=int, default=4)
    parser.add_argument("--alphabet-size", type=int, default=8)
    parser.add_argument("--merges", type=int, nargs="+", default=[32, 128])
    args = parser.parse_args()
    torch.set_num_threads(1)
    data = DistillDataModule()
    train_text, val_text, test_text = data._splits()
    model, tokenizer = data.build_teacher(train_text)
    counts = torch.bincount(torch.tensor(list(train_text.encode())), minlength=256)
    alphabet = bytes(sorted(counts.topk(args.alphabet_size).indices.tolist()))
    teacher = TeacherBytes(model, tokenizer)
    words = spans(test_text, alphabet, args.prefixes, seed=0)
    students = {}
    for merges in args.merges:
        tok = wrap_tokenizer(train_bpe([val_text], 259 + merges))
        try:
            check_subset_pair(tokenizer, tok)
            subset = "a subset (unexpected)"
        except Exception as err:  # the failed precondition, recorded: these students are not subsets
            subset = str(err)
        t0 = time.time()
        students[str(259 + merges)] = {
            "subset_check": subset,
            **measure(teacher, Student(tok), words, alphabet, args.horizon),
            "wall_s": time.time() - t0,
        }
        print(merges, json.dumps(students[str(259 + merges)]["summary"], indent=1))
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(
        json.dumps(
            {
                "command": "python benchmarks/crosstok_general.py "
                f"--prefixes {args.prefixes} --horizon {args.horizon} --alphabet-size {args.alphabet_size}",
                "teacher_ids": len(tokenizer),
                "alphabet": alphabet.decode(),
                "horizon": args.horizon,
                "teacher_forwards": teacher.scorer.teacher_calls,
                "students": students,
                "machine": machine_info(),
            },
            indent=1,
        )
    )
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
