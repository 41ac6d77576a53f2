"""The repetition study: every arm gets the same token budget, the probe formats are never trained on, the
arms hold what they claim (rewrites, copies, upsampling); its means, sds, paired gaps; the whole task."""

from __future__ import annotations

import math
import re
from pathlib import Path

import matplotlib.pyplot as plt
import pytest

from litlab.datamodules.tokenizers import train_bpe, wrap_tokenizer
from litlab.methods.mga import repetition as R
from litlab.task import TaskContext

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


def _row(seed: int, arm: str, size: str, unseen: float, loss: float) -> dict:
    """A per-seed row with every summarised key: ``unseen`` for each probe, ``loss`` for each val set."""
    probes = {f"probe/{p}": unseen for p in (*R.PROBES, "unseen")}
    return {"seed": seed, "arm": arm, "size": size, **probes, **{f"val/{v}": loss for v in R.VAL_SETS}}


# the repetition rows in reverse seed order: gaps pair rows by seed, not by position
ROWS = [
    _row(0, "mga", "d16", 0.5, 3.0),
    _row(1, "mga", "d16", 0.7, 3.2),
    _row(2, "mga", "d16", 0.6, 3.4),
    _row(2, "repetition", "d16", 0.4, 3.5),
    _row(1, "repetition", "d16", 0.3, 3.0),
    _row(0, "repetition", "d16", 0.2, 3.1),
    _row(0, "mga", "d32", 0.9, 2.5),
    _row(0, "repetition", "d32", 0.6, 2.25),
]


def test_summarise_gives_the_mean_and_sample_sd_over_seeds_per_arm_and_size() -> None:
    summary = R.summarise(ROWS, ["mga", "repetition"], ["d16", "d32"])
    assert [(r["size"], r["arm"], r["seeds"]) for r in summary] == [
        ("d16", "mga", 3),
        ("d16", "repetition", 3),
        ("d32", "mga", 1),
        ("d32", "repetition", 1),
    ]
    mga, repetition, one_seed = summary[0], summary[1], summary[2]
    assert mga["probe/unseen"] == pytest.approx(0.6) and mga["probe/unseen_sd"] == pytest.approx(0.1)
    assert mga["val/original_style"] == pytest.approx(3.2) and mga["val/original_style_sd"] == pytest.approx(
        0.2
    )
    assert repetition["val/shakespeare"] == pytest.approx(3.2)
    assert repetition["val/shakespeare_sd"] == pytest.approx(0.2646, abs=1e-4)  # sqrt(0.07), ddof 1
    assert one_seed["probe/cloze"] == pytest.approx(0.9) and one_seed["probe/cloze_sd"] == 0.0


def test_gaps_are_paired_by_seed_and_skip_baselines_that_did_not_run() -> None:
    gaps = R.gaps(ROWS, ["d16", "d32"], ["repetition", "upsampling"])
    assert [(g["size"], g["baseline"]) for g in gaps] == [("d16", "repetition"), ("d32", "repetition")]
    d16, d32 = gaps
    # per-seed differences 0.3, 0.4, 0.2 (unpaired, the sds would give sqrt(0.01 + 0.01) = 0.1414)
    assert d16["unseen_probe_gap"] == pytest.approx(0.3) and d16["unseen_probe_gap_sd"] == pytest.approx(0.1)
    # per-seed differences -0.1, 0.2, -0.1: mean 0, sd sqrt(0.06 / 2)
    assert d16["original_val_loss_gap"] == pytest.approx(0.0, abs=1e-9)
    assert d16["original_val_loss_gap_sd"] == pytest.approx(0.1732, abs=1e-4)
    assert d32["unseen_probe_gap"] == pytest.approx(0.3) and d32["original_val_loss_gap"] == pytest.approx(
        0.25
    )
    assert d32["unseen_probe_gap_sd"] == 0.0 and d32["original_val_loss_gap_sd"] == 0.0


def test_the_study_trains_every_arm_at_one_budget_and_tabulates_seeds_and_gaps(tmp_path: Path) -> None:
    arms = ["repetition", "mga", "mga_copies"]
    cfg = CFG | {
        "n_entities": 6,
        "n_val_entities": 3,
        "shakespeare_chars": 800,
        "shakespeare_val_chars": 800,
        "vocab_size": 300,
        "repeats": 2,
        "block_size": 32,
        "batch_size": 8,
        "lr": 5e-3,
        "probe_tokens": 3,
    }
    sizes = {"d16": {"hidden_size": 16, "num_layers": 1, "num_heads": 2}}
    out = R.repetition_study(TaskContext.local(tmp_path), seeds=[0, 1], arms=arms, sizes=sizes, **cfg)
    rows = out["tables"]["per_seed"]
    assert sorted((r["seed"], r["arm"]) for r in rows) == sorted((s, a) for s in (0, 1) for a in arms)
    for seed in (0, 1):
        mine = {r["arm"]: r for r in rows if r["seed"] == seed}
        assert len({r["budget_tokens"] for r in mine.values()}) == 1
        passes = {arm: r["original_fact_passes"] for arm, r in mine.items()}
        assert passes["mga"] < passes["repetition"] == 2.0 < passes["mga_copies"]
        assert (tmp_path / f"seed{seed}" / "mga" / "corpus.jsonl").is_file()
    for r in rows:
        assert all(0 <= r[f"probe/{p}"] <= 1 for p in R.PROBES)
        assert r["probe/unseen"] == pytest.approx(sum(r[f"probe/{p}"] for p in R.UNSEEN_PROBES) / 3)
        # a few steps already beat the uniform guess over the 300-token vocabulary
        assert all(0 < r[f"val/{v}"] < math.log(300) for v in R.VAL_SETS)
    summary = {r["arm"]: r for r in out["tables"]["summary"]}
    assert set(summary) == set(arms) and all(r["seeds"] == 2 for r in summary.values())
    losses = {arm: [r["val/original_style"] for r in rows if r["arm"] == arm] for arm in arms}
    assert summary["mga"]["val/original_style"] == pytest.approx(sum(losses["mga"]) / 2, abs=1e-4)
    gaps = {g["baseline"]: g for g in out["tables"]["gaps"]}
    assert set(gaps) == {"repetition", "mga_copies"}
    paired = [m - b for m, b in zip(losses["mga"], losses["repetition"], strict=True)]
    assert gaps["repetition"]["original_val_loss_gap"] == pytest.approx(sum(paired) / 2, abs=1e-4)
    assert len(out["metrics"]) == len(arms) * 8
    assert out["metrics"]["mga/d16/val/original_style"] == summary["mga"]["val/original_style"]
    claims = out["tables"]["paper_vs_ours"]
    assert len(claims) == 4 and claims[1]["ours (MGA − baseline, mean ± sd over seeds)"] == "not run"
    figure = out["figures"]["repetition_study"]
    assert len(figure.axes) == 4
    plt.close(figure)
