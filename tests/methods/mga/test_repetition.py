"""The repetition study's data: every arm gets the same token budget, the probe formats are never trained
on, the arms hold what they claim (rewrites, copies, upsampled facts)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from litlab.datamodules.tokenizers import train_bpe, wrap_tokenizer
from litlab.methods.mga import repetition as R

CFG = {
    "n_entities": 12,
    "n_val_entities": 6,
    "held_out_genre": "quiz",
    "n_pairs": 5,
    "noise": 0.2,
    "consistency": {"min_recall": 0.7, "max_overlap": 0.5, "n": 4, "reject_contradictions": True},
    "shakespeare_chars": 2000,
    "shakespeare_val_chars": 2000,
}


@pytest.fixture(scope="module")
def corpora(tmp_path_factory: pytest.TempPathFactory) -> dict:
    return R.build_corpora(CFG, 3, tmp_path_factory.mktemp("mga_rep"))


@pytest.fixture(scope="module")
def docs(corpora: dict) -> dict:
    texts = corpora["facts"] + corpora["mga"] + corpora["shakespeare"]
    tokenizer = wrap_tokenizer(train_bpe(texts, 300))
    return {k: R._docs(tokenizer, corpora[k]) for k in ("facts", "mga", "mga_unfiltered", "shakespeare")}


def _training_text(corpora: dict) -> str:
    return "\n".join(corpora["facts"] + corpora["mga"] + corpora["mga_unfiltered"] + corpora["shakespeare"])


def test_probe_formats_are_never_in_training_text(corpora: dict) -> None:
    training = _training_text(corpora)
    for name in R.UNSEEN_PROBES:
        for prompt, _ in corpora["probes"][name]:
            assert prompt not in training, (name, prompt)
    assert "Answer:" not in training and "Question:" not in training
    # the reference format is seen: each original-style prompt opens a sentence of the fact documents
    assert all(prompt in "\n".join(corpora["facts"]) for prompt, _ in corpora["probes"]["original"])


# a line only the genre's grammar writes
GENRE_MARKS = {
    "dialogue": r" are talking about ",
    "news": r"NEWS: ",
    "children's story": r"Once upon a time",
    "encyclopedia": r"\((person|city|company)\)\n",
}


@pytest.mark.parametrize("genre", sorted(GENRE_MARKS))
def test_any_held_out_genre_is_absent_from_training_and_probed(genre: str, tmp_path: Path) -> None:
    corpora = R.build_corpora(CFG | {"held_out_genre": genre}, 4, tmp_path)
    training = _training_text(corpora)
    assert not re.search(GENRE_MARKS[genre], training)
    assert all(re.search(GENRE_MARKS[genre], t) for t in corpora["val"]["heldout_genre_style"])
    assert not any(prompt in training for prompt, _ in corpora["probes"]["heldout_genre"])


def test_the_held_out_genre_is_dropped_and_the_rewrites_are_filtered(corpora: dict, tmp_path: Path) -> None:
    assert corpora["mga"] and not any("Quiz time" in t for t in corpora["mga"])
    assert all("Quiz time" in t for t in corpora["val"]["heldout_genre_style"])
    # the unfiltered set keeps the rewriter's spoiled outputs (copies of the source among them)
    assert len(corpora["mga_unfiltered"]) > len(corpora["mga"])
    assert set(corpora["facts"]) & set(corpora["mga_unfiltered"]) and not set(corpora["facts"]) & set(
        corpora["mga"]
    )


@pytest.mark.parametrize("arm", R.ARMS)
def test_every_arm_fills_exactly_the_budget(docs: dict, arm: str) -> None:
    budget = 10 * (R._size(docs["facts"]) + R._size(docs["shakespeare"]))
    stream = R.fill(R.arm_pool(arm, docs, budget), budget, 0)
    assert len(stream) == budget


def test_arm_pools_hold_what_they_claim(docs: dict) -> None:
    budget = 10 * (R._size(docs["facts"]) + R._size(docs["shakespeare"]))
    facts = docs["facts"]
    passes = {arm: R.original_passes(R.arm_pool(arm, docs, budget), facts, budget) for arm in R.ARMS}
    assert passes["repetition"] == pytest.approx(10)
    # upsampling and copies show the facts more often than repetition; MGA shows them less (its rewrites
    # take the place of repeats), and the copies arm has MGA's pool size with copies in place of rewrites
    assert passes["upsampling"] > 15 and passes["mga_copies"] > passes["repetition"] > passes["mga"]
    copies = R.arm_pool("mga_copies", docs, budget)
    assert abs(R._size(copies) - R._size(R.arm_pool("mga", docs, budget))) <= max(len(d) for d in facts)


def test_fill_reshuffles_each_pass(docs: dict) -> None:
    pool = docs["facts"]
    stream = R.fill(pool, 2 * R._size(pool), 0)
    first, second = stream.ids[: R._size(pool)], stream.ids[R._size(pool) :]
    assert sorted(first.tolist()) == sorted(second.tolist()) and not first.equal(second)


def test_answer_match() -> None:
    assert (
        R.answer_match([" 1874, I am sure", " 18745", " lute.", "the lute"], ["1874", "1874", "Lute", "lute"])
        == 0.5
    )
