"""The four LLM stages (filter, identifier, generator, checker): each a prompt, a reply parser, and a
deterministic rule that reads our procedural documents the way a good LLM would.

Items are dicts with a unique ``key``; every stage returns one JSON-able dict per item, or None when an
LLM's reply cannot be parsed (counted and dropped, never guessed).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

from litlab.datamodules.webscale_rl import ALL_STYLES, DOMAIN_BY_KIND, fact_pattern, intro_pattern, question
from litlab.methods.webscale_rl import prompts
from litlab.methods.webscale_rl.text import contains_phrase, unit_hash, words

STAGES = ("filter", "identify", "generate", "check")
_FACTS = [fact_pattern(style) for style in ALL_STYLES]
_INTROS = [intro_pattern(style) for style in ALL_STYLES]
_BOILERPLATE = re.compile(r"cookie|subscribe|log in|rights reserved|privacy policy|share this", re.IGNORECASE)
_NO_CONTEXT = re.compile(r"according to the (material|text|passage|article|document)", re.IGNORECASE)


# ----------------------------------------------------------------------------- prompts and parsers
def messages(stage: str, item: dict[str, Any]) -> list[dict[str, str]]:
    """The chat conversation an LLM backend sends for ``item`` at ``stage``."""
    if stage == "filter":
        text = prompts.FILTER.format(material=item["text"])
    elif stage == "identify":
        text = prompts.IDENTIFIER.format(material=item["text"], domains=", ".join(prompts.DOMAIN_LIST))
    elif stage == "generate":
        shots = "\n".join(f"Question: {e['question']}\nAnswer: {e['answer']}" for e in item["examples"])
        text = prompts.GENERATOR.format(material=item["text"], persona=item["persona"], examples=shots)
    else:
        text = prompts.CHECKER.format(material=item["text"], question=item["question"], answer=item["answer"])
    return [{"role": "user", "content": text}]


def _yes(value: Any) -> bool | None:
    letter = str(value).strip()[:1].upper()
    return {"Y": True, "N": False}.get(letter)


def parse(stage: str, reply: dict[str, Any] | None) -> dict[str, Any] | None:
    """A stage's normalised output from an LLM's JSON reply, or None if a field is missing or malformed."""
    if reply is None:
        return None
    if stage == "filter":
        qualified = _yes(reply.get("qualified"))
        return None if qualified is None else {"qualified": qualified}
    if stage == "identify":
        personas = reply.get("personas")
        if not isinstance(reply.get("domain"), str) or not isinstance(personas, list):
            return None
        return {"domain": reply["domain"].strip(), "personas": [str(p) for p in personas][:3]}
    if stage == "generate":
        q, a = reply.get("question"), reply.get("answer")
        ok = isinstance(q, str) and isinstance(a, str) and q.strip() and a.strip()
        return {"question": q.strip(), "answer": a.strip()} if ok else None
    labels = {name: _yes(reply.get(name)) for name in ("has_context", "answer_correctness", "info_leakage")}
    return None if None in labels.values() else labels


# ----------------------------------------------------------------------------- rules
def read_facts(text: str) -> list[tuple[str, str, str]]:
    """``(entity, noun, value)`` of every fact sentence in a document, in order."""
    return [
        (m["name"], m["noun"], m["value"])
        for line in text.splitlines()
        for p in _FACTS
        if (m := p.fullmatch(line))
    ]


def read_intro(text: str) -> tuple[str, str] | None:
    """``(entity, kind)`` from the document's introduction sentence, if it has one."""
    for line in text.splitlines():
        for pattern in _INTROS:
            if m := pattern.fullmatch(line):
                return m["name"], m["kind"]
    return None


def rule_filter(item: dict[str, Any], min_words: int = 25, min_facts: int = 3) -> dict[str, Any]:
    """Qualified: enough words, at least ``min_facts`` fact sentences, at most half the lines boilerplate."""
    lines = item["text"].splitlines()
    boilerplate = sum(bool(_BOILERPLATE.search(line)) for line in lines) / max(len(lines), 1)
    facts = len(read_facts(item["text"]))
    return {"qualified": len(words(item["text"])) >= min_words and facts >= min_facts and boilerplate <= 0.5}


def rule_identify(item: dict[str, Any]) -> dict[str, Any]:
    """Domain = the template family of the introduction's entity kind; personas = that family's readers."""
    intro = read_intro(item["text"])
    domain = DOMAIN_BY_KIND.get(intro[1]) if intro else None
    if domain is None:
        return {"domain": "Other", "personas": []}
    return {"domain": domain.name, "personas": list(domain.personas)}


def rule_generate(item: dict[str, Any], noise: float = 0.0, seed: int = 0) -> dict[str, Any] | None:
    """Persona k asks about the k-th fact of a permutation seeded by the entity's name (reposts of a page
    give the same questions). With probability ``noise`` the pair is spoiled as a careless LLM would spoil
    it: the answer leaked into the background, the background dropped, or a wrong answer."""
    facts, intro = read_facts(item["text"]), read_intro(item["text"])
    if not facts or intro is None:
        return None
    name, kind = intro
    order = sorted(range(len(facts)), key=lambda i: unit_hash("order", name, i))
    personas = DOMAIN_BY_KIND[kind].personas if kind in DOMAIN_BY_KIND else ()
    k = (
        personas.index(item["persona"])
        if item["persona"] in personas
        else int(unit_hash(item["persona"]) * 3)
    )
    _, noun, value = facts[order[k % len(facts)]]
    q, a = question(name, kind, noun), value
    if unit_hash("noise", seed, item["key"]) < noise:
        flaw = int(unit_hash("flaw", seed, item["key"]) * 3)
        if flaw == 0:
            q = f"{name} is a {kind} whose {noun} is {value}. What is the {noun} of {name}?"
        elif flaw == 1:
            q = f"According to the material, what is the {noun}?"
        else:
            pool = [
                v for e in DOMAIN_BY_KIND.values() for n, vs in e.attributes.items() if n == noun for v in vs
            ]
            a = next(
                (v for v in sorted(pool, key=lambda v: unit_hash(item["key"], v)) if v != value), "unknown"
            )
    return {"question": q, "answer": a}


def rule_check(item: dict[str, Any]) -> dict[str, Any]:
    """has_context: the question names the document's entity and does not lean on "the material";
    correctness: the document states a fact whose noun the question asks about with exactly this answer;
    leakage: the answer occurs, as whole words, in the question."""
    intro = read_intro(item["text"])
    q, a = item["question"], item["answer"]
    named = intro is not None and contains_phrase(q, intro[0])
    correct = any(
        contains_phrase(q, noun) and words(value) == words(a) for _, noun, value in read_facts(item["text"])
    )
    return {
        "has_context": named and not _NO_CONTEXT.search(q),
        "answer_correctness": correct,
        "info_leakage": contains_phrase(q, a),
    }


# ----------------------------------------------------------------------------- backends
class RuleBackend:
    """Every stage by its deterministic rule (tests, the CPU study); ``noise`` spoils generated pairs."""

    def __init__(self, noise: float = 0.0, seed: int = 0, min_words: int = 25, min_facts: int = 3) -> None:
        self.noise, self.seed, self.min_words, self.min_facts = noise, seed, min_words, min_facts
        self.name = f"rules(noise={noise})"

    def run(self, stage: str, items: Sequence[dict[str, Any]]) -> list[dict[str, Any] | None]:
        rules: dict[str, Callable[[dict[str, Any]], dict[str, Any] | None]] = {
            "filter": lambda i: rule_filter(i, self.min_words, self.min_facts),
            "identify": rule_identify,
            "generate": lambda i: rule_generate(i, self.noise, self.seed),
            "check": rule_check,
        }
        return [rules[stage](item) for item in items]


class LLMBackend:
    """Every stage through a chat model: the stage's prompt in, its JSON reply parsed out."""

    def __init__(self, chat: Any) -> None:
        self.chat, self.name = chat, chat.name

    def run(self, stage: str, items: Sequence[dict[str, Any]]) -> list[dict[str, Any] | None]:
        from litlab.lm.chat_models import parse_json

        texts = self.chat.complete([messages(stage, item) for item in items])
        return [parse(stage, parse_json(text)) for text in texts]


def build_backend(kind: str = "rules", **options: Any) -> RuleBackend | LLMBackend:
    """``rules`` (noise, seed, min_words, min_facts), ``openai`` (base_url, model, temperature, max_tokens,
    api_key_env, timeout) or ``local`` (path, max_new_tokens, temperature, seed)."""
    from litlab.core.errors import ConfigError

    if kind == "rules":
        return RuleBackend(**options)
    if kind == "openai":
        from litlab.lm.chat_models import OpenAIChat

        if not options.get("base_url") or not options.get("model"):
            raise ConfigError("the openai backend needs task.backend.openai.base_url and .model")
        return LLMBackend(OpenAIChat(**options))
    if kind == "local":
        from litlab.lm.chat_models import LocalChat

        if not options.get("path"):
            raise ConfigError("the local backend needs task.backend.local.path (a checkpoint folder)")
        return LLMBackend(LocalChat.from_pretrained(**options))
    raise ConfigError(f"unknown backend kind {kind!r}; choose rules, openai or local")
