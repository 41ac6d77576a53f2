"""The limited-consistency filter: clean rewrites by every grammar pass; planted contradictions, dropped facts
and near-copies are rejected; the n-gram overlap is checked against a brute-force count."""

from __future__ import annotations

import random
import re

import pytest

from litlab.methods.mga.consistency import judge, ngram_overlap, read_facts, value_vocabulary
from litlab.methods.mga.grammar import AUDIENCES, GENRES, rewrite
from litlab.methods.mga.tasks import fact_documents

DOCS = fact_documents(60, seed=1)
VOCAB = value_vocabulary(DOCS)


def _rewrite(document: dict, genre: str, seed: int = 0) -> str:
    return rewrite(genre, "general readers", document["name"], document["kind"], document["facts"], seed)


def test_overlap_matches_a_brute_force_count() -> None:
    rng = random.Random(0)
    words = ["the", "cat", "sat", "on", "a", "mat", "dog"]
    for _ in range(50):
        a, b = (" ".join(rng.choice(words) for _ in range(rng.randint(3, 12))) for _ in range(2))
        grams = {tuple(a.split()[i : i + 4]) for i in range(len(a.split()) - 3)}
        source = {tuple(b.split()[i : i + 4]) for i in range(len(b.split()) - 3)}
        expected = len(grams & source) / len(grams) if grams else 0.0
        assert ngram_overlap(a, b) == pytest.approx(expected)
    assert ngram_overlap(DOCS[0]["text"], DOCS[0]["text"]) == 1.0


@pytest.mark.parametrize("genre", list(GENRES))
def test_clean_rewrites_of_every_grammar_keep_all_facts_and_pass(genre: str) -> None:
    for seed, document in enumerate(DOCS):
        text = rewrite(
            genre,
            random.Random(seed).choice(list(AUDIENCES)),
            document["name"],
            document["kind"],
            document["facts"],
            seed,
        )
        verdict = judge(text, document, VOCAB)
        assert verdict["keep"] and verdict["recall"] == 1.0 and verdict["contradicted"] == 0, text
        assert verdict["overlap"] <= 0.5


def test_lexical_variation_gives_different_texts_for_different_seeds() -> None:
    texts = {_rewrite(DOCS[0], "news", seed) for seed in range(6)}
    assert len(texts) >= 4


def test_a_planted_contradiction_is_rejected_even_with_every_other_fact_kept() -> None:
    rejected = 0
    for index, document in enumerate(DOCS):
        text = _rewrite(document, list(GENRES)[index % len(GENRES)], index)
        key, value = document["facts"][0]
        others = sorted(VOCAB[key] - {value})
        wrong = str(int(value) + 1) if value.isdigit() else others[index % len(others)]
        spoiled = re.sub(rf"(?<!\w){re.escape(value)}(?!\w)", wrong, text, count=1)
        verdict = judge(spoiled, document, VOCAB)
        assert verdict["contradicted"] >= 1, (key, value, wrong, spoiled)
        rejected += not verdict["keep"]
        assert judge(spoiled, document, VOCAB, reject_contradictions=False)["recall"] >= 0.8
    assert rejected == len(DOCS)


def test_near_copies_and_lost_facts_are_rejected() -> None:
    for document in DOCS[:20]:
        copy = document["text"].replace(" is ", " was ", 1) + " Source: the archive."
        assert judge(copy, document, VOCAB)["copy"] and not judge(copy, document, VOCAB)["keep"]
        facts = document["facts"]
        kept = facts[: int(0.7 * len(facts)) - 1 or 1]
        partial = rewrite("quiz", "investors", document["name"], document["kind"], kept, 0)
        verdict = judge(partial, document, VOCAB)
        assert verdict["lost_facts"] and not verdict["keep"] and verdict["recall"] < 0.7


def test_read_facts_counts_recovered_and_contradicted_facts() -> None:
    document = DOCS[0]
    text = _rewrite(document, "encyclopedia")
    assert read_facts(text, document["facts"], VOCAB) == (len(document["facts"]), 0)
    assert read_facts("Nothing relevant here.", document["facts"], VOCAB) == (0, 0)
