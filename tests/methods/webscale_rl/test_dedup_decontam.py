"""Near-duplicate removal against exact Jaccard similarity, and decontamination against a brute-force
n-gram coverage, each catching planted items and sparing clean ones."""

from __future__ import annotations

import random

import numpy as np

from litlab.datamodules.webscale_rl import make_corpus
from litlab.methods.webscale_rl.decontam import contaminated, eval_coverage
from litlab.methods.webscale_rl.dedup import minhashes, near_duplicates
from litlab.methods.webscale_rl.text import ngrams

VOCAB = [f"w{i}" for i in range(400)]


def _sentence(rng: random.Random, n: int = 30) -> list[str]:
    return [rng.choice(VOCAB) for _ in range(n)]


def _jaccard(a: str, b: str, n: int = 3) -> float:
    x, y = ngrams(a, n), ngrams(b, n)
    return len(x & y) / len(x | y)


def test_minhash_estimates_exact_jaccard_within_its_standard_error() -> None:
    rng = random.Random(0)
    base = _sentence(rng, 60)
    variants = [" ".join(base[: 60 - k] + _sentence(rng, k)) for k in range(0, 60, 4)]
    exact = np.array([_jaccard(" ".join(base), v) for v in variants])
    hashes = minhashes([" ".join(base), *variants], num_perm=256)
    estimate = np.array([hashes[0].jaccard(h) for h in hashes[1:]])
    se = np.sqrt(exact * (1 - exact) / 256)
    assert np.all(np.abs(estimate - exact) <= 4 * se + 1e-9), (exact, estimate)


def test_dedup_flags_planted_near_duplicates_and_only_them() -> None:
    rng = random.Random(1)
    originals = [_sentence(rng) for _ in range(200)]
    texts = [" ".join(s) for s in originals]
    planted = []
    for index in rng.sample(range(200), 40):
        copy = list(originals[index])
        copy[-1] = "changed"  # one word of 30: Jaccard of 3-gram sets 27/29 = 0.93
        planted.append(len(texts))
        texts.append(" ".join(copy))
    flagged = near_duplicates(texts, threshold=0.8)
    exact_max = np.array([max((_jaccard(t, u) for u in texts[:i]), default=0) for i, t in enumerate(texts)])
    assert set(np.flatnonzero(flagged)) == set(planted)
    assert exact_max[flagged].min() >= 0.9 and exact_max[~flagged].max() < 0.5


def test_coverage_equals_a_brute_force_computation() -> None:
    rng = random.Random(2)
    evaluation = [" ".join(_sentence(rng, rng.randint(3, 12))) for _ in range(30)]
    train = [
        " ".join(rng.choice(evaluation).split()[: rng.randint(2, 12)] + _sentence(rng, 5)) for _ in range(80)
    ]
    best, which = eval_coverage(train, evaluation, n=3)
    for t, b, w in zip(train, best, which, strict=True):
        shares = [len(ngrams(t, 3) & ngrams(e, 3)) / len(ngrams(e, 3)) for e in evaluation]
        assert np.isclose(b, max(shares))
        assert b == 0 or np.isclose(shares[w], b)


def test_decontamination_removes_planted_eval_items_and_keeps_clean_questions() -> None:
    corpus = make_corpus(200, seed=3)
    evaluation = [f"{e['question']} {e['answer']}" for e in corpus["eval"]]
    # Clean: other facts of the same entities, asked in the same template (sharing the background clause).
    clean = []
    for entity, item in zip(corpus["entities"], corpus["eval"], strict=True):
        noun, value = entity["facts"][0]
        clean.append(item["question"].replace(item["noun"], noun) + f" {value}")
    planted = evaluation[::5] + [f"Quick quiz: {e} (from our site)" for e in evaluation[1::7]]
    dirty = contaminated(clean + planted, evaluation, n=5, threshold=0.8)
    assert not dirty[: len(clean)].any() and dirty[len(clean) :].all()
