"""The one small protocol every subject speaks: a batch of queries in, one reply per query out.

A ``Query`` carries the chat ``messages`` a language model reads and, beside them, the structured facts
(the question item, the game's variables) that only a simulated agent uses. A ``Reply`` is the raw text
and, where the backend exposes them, the log-probabilities of each allowed label as the first token.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass(frozen=True)
class Query:
    """One prompt of a game. ``key`` is unique within a run (resuming skips keys already answered);
    ``kind`` is ``answer`` | ``delegate`` | ``decision`` | ``second_chance``; ``labels`` are the replies the
    parser accepts; ``meta`` holds the game's variables (teammate accuracy, label mapping, variant, ...)."""

    key: str
    kind: str
    messages: tuple[dict[str, str], ...]
    labels: tuple[str, ...]
    item: dict[str, Any]
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Reply:
    """The subject's text and, if the backend gives them, log p(label) of each allowed label (first token)."""

    text: str
    logprobs: dict[str, float] | None = None


class Backend(Protocol):
    """A subject: answers a batch of queries in order (deterministically for a fixed seed)."""

    name: str

    def complete(self, queries: Sequence[Query]) -> list[Reply]: ...
