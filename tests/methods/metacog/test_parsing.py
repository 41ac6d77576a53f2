"""Replies are parsed to one allowed label or counted as unparseable, never guessed."""

from __future__ import annotations

import pytest

from litlab.methods.metacog.parsing import parse_label

LETTERS = ("A", "B", "C", "D", "T")


@pytest.mark.parametrize(
    ("text", "label"),
    [
        ("B", "B"),
        ("(b)", "B"),
        ("B.", "B"),
        ("Answer: C) 42", "C"),
        ("  the answer is d", "D"),
        ("T", "T"),
        ("I pick B.", "B"),
        ("Final answer: A", "A"),
        ("42", None),
        ("", None),
        ("A few options: B or C", None),
        ("maybe", None),
        ("E", None),
    ],
)
def test_letters(text: str, label: str | None) -> None:
    assert parse_label(text, LETTERS) == label


def test_decision_digits() -> None:
    assert parse_label("Choice: 2", ("1", "2")) == "2"
    assert parse_label("1 or 2", ("1", "2")) is None
    assert parse_label("T (delegate)", ("A", "T")) == "T"
    assert parse_label("B because it is larger", ("A", "B")) == "B"
    assert parse_label("three", ("1", "2")) is None
