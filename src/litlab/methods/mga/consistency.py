"""The limited-consistency filter: a rewrite must keep the source's facts (a parser recovers ≥ 70 % of them
and finds none contradicted) without copying it (word 4-gram overlap with the source ≤ 0.5)."""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from litlab.methods.mga.grammar import ATTRIBUTES

_WORD = re.compile(r"\w+(?:['’-]\w+)*")
_UNIT = re.compile(r"\n+|(?<=[.!])\s+")
_NUMBER = re.compile(r"\b\d+\b")
_CUES = {key: re.compile(cue, re.IGNORECASE) for key, (_, cue) in ATTRIBUTES.items()}
NUMERIC = frozenset({"birth_year", "height", "population", "founded", "employees"})


def ngrams(text: str, n: int) -> set[tuple[str, ...]]:
    words = _WORD.findall(text.lower())
    return {tuple(words[i : i + n]) for i in range(len(words) - n + 1)}


def ngram_overlap(rewrite: str, source: str, n: int = 4) -> float:
    """Share of the rewrite's word n-grams that occur in the source (1.0 for a copy, 0 for none shared)."""
    grams = ngrams(rewrite, n)
    return len(grams & ngrams(source, n)) / len(grams) if grams else 0.0


def _has(text: str, value: str) -> bool:
    return re.search(rf"(?<!\w){re.escape(value)}(?!\w)", text, re.IGNORECASE) is not None


def value_vocabulary(documents: Iterable[Mapping[str, Any]]) -> dict[str, set[str]]:
    """Every value each attribute takes in the corpus: what a contradicting rewrite would state instead."""
    vocabulary: dict[str, set[str]] = defaultdict(set)
    for document in documents:
        for key, value in document.get("facts") or ():
            vocabulary[key].add(value)
    return dict(vocabulary)


def read_facts(
    rewrite: str, facts: Sequence[tuple[str, str]], vocabulary: Mapping[str, set[str]]
) -> tuple[int, int]:
    """``(recovered, contradicted)``: facts whose value the rewrite states; facts for which a sentence that
    names the attribute (its cue) states another value of that attribute instead."""
    units = [u for u in _UNIT.split(rewrite) if u.strip()]
    recovered = contradicted = 0
    for key, value in facts:
        recovered += _has(rewrite, value)
        cue = _CUES.get(key)
        if cue is None:
            continue
        for unit in (u for u in units if cue.search(u) and not _has(u, value)):
            others = (
                _NUMBER.findall(unit)
                if key in NUMERIC
                else [v for v in vocabulary.get(key, ()) if v != value and _has(unit, v)]
            )
            if others:
                contradicted += 1
                break
    return recovered, contradicted


def judge(
    rewrite: str,
    source: Mapping[str, Any],
    vocabulary: Mapping[str, set[str]],
    min_recall: float = 0.7,
    max_overlap: float = 0.5,
    n: int = 4,
    reject_contradictions: bool = True,
) -> dict[str, Any]:
    """The filter's verdict and its measurements; fact criteria apply only to sources that carry ``facts``
    (a plain-text corpus is judged on overlap alone)."""
    overlap = ngram_overlap(rewrite, source["text"], n)
    verdict: dict[str, Any] = {"overlap": round(overlap, 4), "copy": overlap > max_overlap}
    facts = source.get("facts") or ()
    if facts:
        recovered, contradicted = read_facts(rewrite, facts, vocabulary)
        verdict |= {
            "recall": round(recovered / len(facts), 4),
            "contradicted": contradicted,
            "lost_facts": recovered / len(facts) < min_recall,
        }
    else:
        verdict |= {"recall": None, "contradicted": 0, "lost_facts": False}
    verdict["keep"] = not (
        verdict["copy"] or verdict["lost_facts"] or (reject_contradictions and verdict["contradicted"])
    )
    return verdict
