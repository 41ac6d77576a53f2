"""Byte-level BPE: round trips on any text, the content-keyed cache, exact byte counts for every tokenizer
family (byte-level, SentencePiece-style, WordPiece, built locally), and the subset property of students
made of a teacher's first N merges."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from transformers import PreTrainedTokenizerBase

import litlab.datamodules.tokenizers as tokenizers
from litlab.datamodules.tokenizers import (
    SPECIAL_TOKENS,
    bpe_merges,
    byte_counts,
    cached_bpe,
    is_byte_level,
    load_tokenizer,
    student_decomposition,
    subset_tokenizer,
    token_byte_lengths,
    tokenizer_cache_path,
)
from tests.lm.local_tokenizers import sentencepiece_bpe, sentencepiece_unigram, wordpiece

FAMILIES = {"sentencepiece_bpe": sentencepiece_bpe, "unigram": sentencepiece_unigram, "wordpiece": wordpiece}
TEXTS = [
    "Hello world, the torches burn so bright.",
    "  ROMEO:  O, she doth\n\tteach é 日本 😀  ",
    "x",
    "ÜNÏCÖDÉ Àccents   and\r\n\nnewlines ﬁ ①",  # BERT's normaliser strips accents, NFKC rewrites ﬁ and ①
]


def random_strings(corpus: str, n: int, seed: int) -> list[str]:
    """Mixtures of corpus words, punctuation, digits, odd whitespace and arbitrary unicode code points."""
    rng = random.Random(seed)
    words = corpus.split()
    alphabet = " \n\t\r  ,.;:'!?-0123456789é日本😀\u0301\x00\x7f'sll've"
    out = []
    for _ in range(n):
        parts = []
        for _ in range(rng.randint(1, 12)):
            roll = rng.random()
            if roll < 0.5:
                parts.append(rng.choice(words) + rng.choice([" ", "", "\n", "  ", "'s "]))
            elif roll < 0.8:
                parts.append("".join(rng.choice(alphabet) for _ in range(rng.randint(1, 5))))
            else:
                parts.append("".join(chr(rng.randint(1, 0x2FFFF)) for _ in range(rng.randint(1, 3))))
        out.append("".join(parts).encode("utf-8", "replace").decode("utf-8"))  # drop lone surrogates
    return out


def test_any_text_round_trips_and_counts_its_bytes(
    tokenizer: PreTrainedTokenizerBase, shakespeare: str
) -> None:
    lengths = token_byte_lengths(tokenizer)
    for text in random_strings(shakespeare, 300, seed=0):
        ids = tokenizer.encode(text, add_special_tokens=False)
        assert tokenizer.decode(ids) == text
        assert int(lengths[ids].sum()) == len(text.encode("utf-8"))
    assert [tokenizer.convert_tokens_to_ids(t) for t in SPECIAL_TOKENS] == [0, 1, 2]
    assert tokenizer.eos_token_id == 0 and tokenizer.pad_token_id == 1 and tokenizer.mask_token_id == 2
    assert lengths[:3].tolist() == [0, 0, 0]


def test_cache_trains_once_and_keys_on_corpus_and_size(
    tmp_path: Path, shakespeare: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = []
    original = tokenizers.train_bpe
    monkeypatch.setattr(tokenizers, "train_bpe", lambda *a, **k: calls.append(1) or original(*a, **k))
    texts = [shakespeare[:20_000]]
    first = cached_bpe(texts, 400, tmp_path)
    second = cached_bpe(texts, 400, tmp_path)
    assert len(calls) == 1 and first.get_vocab() == second.get_vocab()
    assert tokenizer_cache_path(texts, 400, tmp_path).is_file()
    assert tokenizer_cache_path(texts, 401, tmp_path) != tokenizer_cache_path(texts, 400, tmp_path)
    assert tokenizer_cache_path([texts[0] + "x"], 400, tmp_path) != tokenizer_cache_path(texts, 400, tmp_path)
    monkeypatch.setenv("LITLAB_CACHE", str(tmp_path / "env"))
    assert tokenizer_cache_path(texts, 400, None).is_relative_to(tmp_path / "env")


def test_save_pretrained_reloads_the_same_tokenizer(
    tokenizer: PreTrainedTokenizerBase, tmp_path: Path
) -> None:
    tokenizer.save_pretrained(tmp_path)
    loaded = load_tokenizer(tmp_path)
    text = "ROMEO: O, she doth teach the torches to burn bright! 日本 😀"
    assert loaded.encode(text, add_special_tokens=False) == tokenizer.encode(text, add_special_tokens=False)
    assert (loaded.eos_token_id, loaded.pad_token_id, loaded.mask_token_id) == (0, 1, 2)


@pytest.mark.parametrize("n_merges", [0, 50, 300, -1])
def test_subset_student_encodes_as_concatenated_teacher_tokens(
    tokenizer: PreTrainedTokenizerBase, shakespeare: str, n_merges: int
) -> None:
    teacher = tokenizer
    n_merges = len(bpe_merges(teacher)) if n_merges < 0 else n_merges
    student = subset_tokenizer(teacher, n_merges)
    assert len(student) == len(SPECIAL_TOKENS) + 256 + n_merges
    teacher_vocab = teacher.get_vocab()
    assert all(teacher_vocab[token] == index for token, index in student.get_vocab().items())
    d = student_decomposition(teacher, student)
    for text in random_strings(shakespeare, 400, seed=n_merges + 1):
        teacher_ids = teacher.encode(text, add_special_tokens=False)
        expected = [s for t in teacher_ids for s in d[t]]
        assert student.encode(text, add_special_tokens=False) == expected, text
        assert student.decode(expected) == text
    if n_merges == len(bpe_merges(teacher)):
        assert d == [[t] for t in range(len(teacher))]


def test_subset_rejects_more_merges_than_the_teacher_has(tokenizer: PreTrainedTokenizerBase) -> None:
    with pytest.raises(ValueError, match="n_merges"):
        subset_tokenizer(tokenizer, len(bpe_merges(tokenizer)) + 1)


@pytest.fixture(scope="module")
def families(shakespeare: str) -> dict[str, PreTrainedTokenizerBase]:
    return {name: build(shakespeare[:30_000]) for name, build in FAMILIES.items()}


@pytest.mark.parametrize("family", [*FAMILIES, "byte_level"])
def test_byte_counts_sum_to_the_text_for_every_tokenizer_family(
    families: dict, tokenizer: PreTrainedTokenizerBase, shakespeare: str, family: str
) -> None:
    model = tokenizer if family == "byte_level" else families[family]
    assert is_byte_level(model) == (family == "byte_level")
    texts = TEXTS + random_strings(shakespeare, 150, seed=11)
    for text, counts in zip(texts, byte_counts(model, texts)):
        ids = model.encode(text, add_special_tokens=False)
        assert len(counts) == len(ids) and (counts >= 0).all()
        assert int(counts.sum()) == len(text.encode("utf-8")), (family, text)


def test_per_token_bytes_follow_each_family_s_markers(families: dict) -> None:
    """Mid-text lengths: SentencePiece's "▁" is a space byte and <0xNN> one byte; WordPiece's "##" is none."""
    sp, wp = families["sentencepiece_bpe"], families["wordpiece"]
    lengths = token_byte_lengths(sp)
    for token, index in sp.get_vocab().items():
        if token.startswith("<0x"):
            assert lengths[index] == 1
        elif index not in sp.added_tokens_decoder:
            assert lengths[index] == len(token.replace("▁", " ").encode()), token
    assert lengths[sp.convert_tokens_to_ids("▁the")] == 4
    lengths = token_byte_lengths(wp)
    pieces = [(t, i) for t, i in wp.get_vocab().items() if t.startswith("##")]
    assert pieces and all(lengths[i] == len(t[2:].encode()) for t, i in pieces)
