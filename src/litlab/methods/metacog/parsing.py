"""Robust parsing of a subject's reply into one allowed label; what cannot be parsed is reported as None
(and counted by the games), never guessed."""

from __future__ import annotations

import re
from collections.abc import Sequence

_LEAD = re.compile(
    r"^\W*(?:(?:the\s+|my\s+)?(?:final\s+)?(?:answer|choice|option)\s*(?:is)?\s*[:\-]?)?\W*", re.I
)
_FIRST = re.compile(r"([A-Za-z0-9]+)(?=\s*$|\s*[^\w\s])")  # a word standing alone or before punctuation


def parse_label(text: str, labels: Sequence[str]) -> str | None:
    """The label ``text`` gives, or None.

    First the reply's first word after an optional lead, when it ends the reply or meets punctuation ("B",
    "(b)", "B.", "Answer: B) 42", "the answer is d", "T"); else the single allowed label that stands alone
    in the text as an upper-case letter or digit ("I pick B."); None when there is none or more than one
    ("A few options: B or C", "1 or 2": ambiguous replies are not guessed).
    """
    allowed = {label.upper(): label for label in labels}
    first = _FIRST.match(_LEAD.sub("", text.strip(), count=1))
    if first and first.group(1).upper() in allowed:
        return allowed[first.group(1).upper()]
    alone = set(re.findall(r"(?<![A-Za-z0-9])([A-Z0-9])(?![A-Za-z0-9])", text)) & set(allowed)
    return allowed[alone.pop()] if len(alone) == 1 else None
