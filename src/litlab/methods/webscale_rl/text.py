"""Text normalisation and word n-grams shared by the checker, dedup and decontamination."""

from __future__ import annotations

import hashlib
import re

_WORD = re.compile(r"[a-z0-9]+")


def words(text: str) -> list[str]:
    """Lower-cased alphanumeric words (punctuation and thousands separators dropped)."""
    return _WORD.findall(text.lower().replace(",", ""))


def ngrams(text: str, n: int) -> set[str]:
    """The set of word n-grams of ``text`` (a text shorter than n words is one n-gram)."""
    tokens = words(text)
    if len(tokens) <= n:
        return {" ".join(tokens)} if tokens else set()
    return {" ".join(tokens[i : i + n]) for i in range(len(tokens) - n + 1)}


def contains_phrase(text: str, phrase: str) -> bool:
    """Whether ``phrase`` occurs in ``text`` as whole words, after normalisation."""
    needle = " ".join(words(phrase))
    return bool(needle) and f" {needle} " in f" {' '.join(words(text))} "


def unit_hash(*parts: object) -> float:
    """A deterministic number in [0, 1) from ``parts`` (same in every process, unlike ``hash``)."""
    digest = hashlib.blake2b("\x1f".join(map(str, parts)).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64
