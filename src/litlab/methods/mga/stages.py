"""MGA's two LLM stages, genre–audience pairs and reformulation: prompts, reply parsers, the rule backend and
the chat-model backend (``litlab.lm.chat_models``).

A pair stage output is a list of ``{"genre", "genre_description", "audience", "audience_description"}``
(distinct, at most ``n_pairs``) or None for a reply that holds no valid pair; a rewrite is a text or None.
"""

from __future__ import annotations

import hashlib
import random
import re
from collections.abc import Sequence
from typing import Any

from litlab.core.errors import ConfigError
from litlab.methods.mga.grammar import AUDIENCE_BY_KIND, AUDIENCES, GENRES, rewrite

STAGES = ("pairs", "rewrite")

# The GA prompt follows the MGA-derived copy: analyse first, then 5 distinct pairs, each genre and audience
# with a title and a description (purpose, structure, style, depth for the genre).
PAIRS_PROMPT = """You are an expert in content creation and reader analysis.
First analyse the text below: its style, the information it holds and its value to readers.
Then propose {n} distinct genre–audience pairs for rewriting it, with no duplicates. For each pair give a
genre title and description (purpose, structure, style, depth) and an audience title and description.

[Text]
{text}

Reply with JSON: {{"analysis": "...", "pairs": [{{"genre": {{"title": "...", "description": "..."}},
"audience": {{"title": "...", "description": "..."}}}}, ...]}}"""

REWRITE_PROMPT = """Rewrite the text below as {genre} ({genre_description})
for {audience} ({audience_description}).
Keep every fact of the original, but do not copy its sentences: use the genre's own structure and words.
Reply with the rewritten text only.

[Text]
{text}"""

_FENCE = re.compile(r"^```\w*\n?|\n?```$")


def _seed(*parts: str) -> int:
    return int.from_bytes(hashlib.sha256("\x1f".join(parts).encode()).digest()[:4], "little")


def pair_messages(item: dict[str, Any], n_pairs: int) -> list[dict[str, str]]:
    return [{"role": "user", "content": PAIRS_PROMPT.format(n=n_pairs, text=item["text"])}]


def rewrite_messages(item: dict[str, Any]) -> list[dict[str, str]]:
    return [{"role": "user", "content": REWRITE_PROMPT.format(**item["pair"], text=item["text"])}]


def _title(value: Any) -> tuple[str, str] | None:
    """``(title, description)`` of a genre or audience given as an object or a bare string."""
    if isinstance(value, str) and value.strip():
        return value.strip(), ""
    if isinstance(value, dict) and isinstance(value.get("title"), str) and value["title"].strip():
        return value["title"].strip(), str(value.get("description") or "").strip()
    return None


def parse_pairs(reply: dict[str, Any] | None, n_pairs: int) -> list[dict[str, str]] | None:
    """The distinct valid pairs of a JSON reply (case-insensitive duplicates dropped), at most ``n_pairs``;
    None when the reply holds none."""
    entries = reply.get("pairs") if isinstance(reply, dict) else None
    if not isinstance(entries, list):
        return None
    pairs, seen = [], set()
    for entry in entries:
        genre, audience = (
            _title(entry.get(k)) if isinstance(entry, dict) else None for k in ("genre", "audience")
        )
        if genre is None or audience is None or (genre[0].lower(), audience[0].lower()) in seen:
            continue
        seen.add((genre[0].lower(), audience[0].lower()))
        pairs.append(
            {
                "genre": genre[0],
                "genre_description": genre[1],
                "audience": audience[0],
                "audience_description": audience[1],
            }
        )
    return pairs[:n_pairs] or None


def parse_rewrite(text: str) -> str | None:
    """The rewritten text (a code fence stripped), or None when empty."""
    text = _FENCE.sub("", text.strip()).strip()
    return text or None


class RuleBackend:
    """The deterministic stand-in for the LLM: pairs drawn from the pools (audiences the document's kind
    suggests first, genres shuffled per document), rewrites by the genre grammars from the document's facts.

    ``noise`` spoils that share of rewrites the way a careless rewriter does (a near-copy of the source, a
    changed fact, half the facts dropped), so that the consistency filter has work to do.
    """

    name = "rules"

    def __init__(self, n_pairs: int = 5, noise: float = 0.0, seed: int = 0) -> None:
        if n_pairs > len(GENRES) * len(AUDIENCES):
            raise ConfigError(
                f"the rule backend knows {len(GENRES) * len(AUDIENCES)} pairs; n_pairs={n_pairs}"
            )
        self.n_pairs, self.noise, self.seed = n_pairs, noise, seed

    def pairs(self, item: dict[str, Any]) -> list[dict[str, str]]:
        rng = random.Random(_seed(str(self.seed), item["key"]))
        preferred = list(AUDIENCE_BY_KIND.get(item.get("kind", ""), ()))
        audiences = preferred + rng.sample(
            [a for a in AUDIENCES if a not in preferred], len(AUDIENCES) - len(preferred)
        )
        genres = rng.sample(list(GENRES), len(GENRES))
        rounds = range(len(audiences))  # round r pairs genre i with audience i + r: every pair once
        ordered = [(g, audiences[(i + r) % len(audiences)]) for r in rounds for i, g in enumerate(genres)]
        chosen = ordered[: self.n_pairs]
        return [
            {"genre": g, "genre_description": GENRES[g], "audience": a, "audience_description": AUDIENCES[a]}
            for g, a in chosen
        ]

    def rewrite(self, item: dict[str, Any]) -> str:
        if not item.get("facts") or not item.get("name"):
            raise ConfigError(
                "the rules backend rewrites documents that carry facts; use an LLM backend for text"
            )
        seed = _seed(str(self.seed), item["key"])
        pair, facts = item["pair"], [tuple(f) for f in item["facts"]]
        rng = random.Random(seed)
        if pair["genre"] not in GENRES:
            raise ConfigError(f"the rules backend has no grammar for genre {pair['genre']!r}")
        text = rewrite(pair["genre"], pair["audience"], item["name"], item.get("kind", "thing"), facts, seed)
        if rng.random() >= self.noise:
            return text
        fault = rng.choice(("copy", "contradiction", "drop"))
        if fault == "copy":
            return item["text"]
        numbers = [value for _, value in facts if value.isdigit()]
        if fault == "drop" or not numbers:
            kept = facts[: len(facts) // 2]
            return rewrite(
                pair["genre"], pair["audience"], item["name"], item.get("kind", "thing"), kept, seed
            )
        return re.sub(rf"\b{numbers[0]}\b", str(int(numbers[0]) + 7), text)

    def run(self, stage: str, items: Sequence[dict[str, Any]]) -> list[Any]:
        return [self.pairs(item) if stage == "pairs" else self.rewrite(item) for item in items]


class LLMBackend:
    """Both stages through a chat model (``complete(conversations) -> texts``); replies are parsed, never
    guessed."""

    def __init__(self, chat: Any, n_pairs: int = 5) -> None:
        self.chat, self.n_pairs, self.name = chat, n_pairs, chat.name

    def run(self, stage: str, items: Sequence[dict[str, Any]]) -> list[Any]:
        from litlab.lm.chat_models import parse_json

        if stage == "pairs":
            texts = self.chat.complete([pair_messages(item, self.n_pairs) for item in items])
            return [parse_pairs(parse_json(text), self.n_pairs) for text in texts]
        return [
            parse_rewrite(text) for text in self.chat.complete([rewrite_messages(item) for item in items])
        ]


def build_backend(kind: str = "rules", n_pairs: int = 5, **options: Any) -> RuleBackend | LLMBackend:
    """``rules`` (noise, seed), ``openai`` (base_url, model, temperature, max_tokens, api_key_env, timeout) or
    ``local`` (path, max_new_tokens, temperature, seed)."""
    if kind == "rules":
        return RuleBackend(n_pairs=n_pairs, **options)
    if kind == "openai":
        from litlab.lm.chat_models import OpenAIChat

        if not options.get("base_url") or not options.get("model"):
            raise ConfigError("the openai backend needs task.backend.openai.base_url and .model")
        return LLMBackend(OpenAIChat(**options), n_pairs)
    if kind == "local":
        from litlab.lm.chat_models import LocalChat

        if not options.get("path"):
            raise ConfigError("the local backend needs task.backend.local.path (a checkpoint folder)")
        return LLMBackend(LocalChat.from_pretrained(**options), n_pairs)
    raise ConfigError(f"unknown backend kind {kind!r}; choose rules, openai or local")
