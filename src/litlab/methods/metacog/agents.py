"""Simulated subjects with a known decision rule, the ground truth the analysis must recover.

Every agent holds the same kind of internal state: per question, logits over the four options whose
margin for the right option falls with the surface difficulty and carries question-specific noise (what
a model "knows" beyond what the question looks like). It answers greedily. Only the delegation rule
differs:

- ``positive``: delegates with probability σ(k·(teammate accuracy − own max probability)): it uses its
  own confidence signal, the metacognitive behaviour;
- ``negative``: delegates with probability σ(k_s·(surface score − c)) from digits and operation only:
  the "looks hard" heuristic;
- ``random``: delegates with probability 1/2.

In the Second Chance Game an agent that ``anticipates`` its own answer avoids it when told it was
wrong even if it is redacted; one that does not repeats its greedy answer unless it sees it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from litlab.core.errors import ConfigError
from litlab.datamodules.metacog_questions import LABELS
from litlab.methods.metacog.backends import Query, Reply

POLICIES = ("positive", "negative", "random")


def surface_score(digits: np.ndarray, is_product: np.ndarray) -> np.ndarray:
    """The difficulty a question shows on its face: operand digits plus one for a product."""
    return digits + is_product.astype(float)


def query_uniform(seed: int, key: str) -> float:
    """A uniform draw fixed by (seed, query key): replies do not depend on batching or resuming."""
    digest = hashlib.sha256(f"{seed}/{key}".encode()).digest()
    return int.from_bytes(digest[:8], "little") / 2**64


@dataclass
class SimulatedAgent:
    """A subject with a known policy (``positive`` | ``negative`` | ``random``) over a question bank.

    ``skill`` − ``slope``·surface score + ``noise``·ε is the right option's logit margin (ε ~ N(0, 1) per
    question); ``sharpness`` scales the delegation rule; ``garble`` is the share of replies that are
    unparseable text (to exercise the parser's accounting).
    """

    policy: str
    seed: int = 0
    skill: float = 5.0
    slope: float = 0.8
    noise: float = 1.5
    sharpness: float = 10.0
    anticipates: bool = True
    garble: float = 0.02

    def __post_init__(self) -> None:
        if self.policy not in POLICIES:
            raise ConfigError(f"policy={self.policy!r}; choose one of {', '.join(POLICIES)}")

    def option_probs(self, items: Sequence[dict[str, Any]]) -> np.ndarray:
        """``(n, 4)`` the agent's answer distribution for each item (fixed by seed and item id)."""
        ids = np.array([q["id"] for q in items])
        rng = np.random.default_rng(self.seed)
        table = rng.standard_normal((int(ids.max()) + 1, 5))  # row i belongs to question id i, whatever n
        digits = np.array([q["digits"] for q in items])
        product = np.array([q["op"] == "*" for q in items])
        margin = self.skill - self.slope * surface_score(digits, product) + self.noise * table[ids, 0]
        logits = 0.5 * table[ids, 1:]
        logits[np.arange(len(items)), [q["answer"] for q in items]] += margin
        logits -= logits.max(1, keepdims=True)
        probs = np.exp(logits)
        return probs / probs.sum(1, keepdims=True)

    def delegate_probability(self, items: Sequence[dict[str, Any]], teammate: np.ndarray) -> np.ndarray:
        """``(n,)`` P(delegate) of each phase-2 trial under the agent's policy."""
        if self.policy == "random":
            return np.full(len(items), 0.5)
        if self.policy == "positive":
            x = teammate - self.option_probs(items).max(1)
        else:
            digits = np.array([q["digits"] for q in items])
            product = np.array([q["op"] == "*" for q in items])
            x = (surface_score(digits, product) - 3.0) / 4 + (teammate - 0.6)
        return 1 / (1 + np.exp(-self.sharpness * x))


class SimulatedBackend:
    """A ``Backend`` replying as a ``SimulatedAgent``; it reads only the queries' structured fields."""

    def __init__(self, agent: SimulatedAgent) -> None:
        self.agent = agent
        self.name = f"simulated-{agent.policy}"

    def complete(self, queries: Sequence[Query]) -> list[Reply]:
        """One reply per query, fixed by the agent's seed and each query's key."""
        if not queries:
            return []
        items = [q.item for q in queries]
        probs = self.agent.option_probs(items)
        greedy = probs.argmax(1)
        u = np.array([query_uniform(self.agent.seed, q.key) for q in queries])
        teammate = np.array([q.meta.get("teammate_accuracy", 0.5) for q in queries])
        p_delegate = self.agent.delegate_probability(items, teammate)
        replies = []
        for i, query in enumerate(queries):
            if query_uniform(self.agent.seed + 1, query.key) < self.agent.garble:
                replies.append(Reply("I am not sure how to respond to this."))
                continue
            letters = dict(zip(LABELS, np.log(probs[i]).tolist(), strict=True))
            if query.kind == "answer":
                replies.append(Reply(f"Answer: {LABELS[greedy[i]]}", letters))
            elif query.kind == "delegate":
                delegate = u[i] < p_delegate[i]
                logp = {k: v + np.log1p(-p_delegate[i]) for k, v in letters.items()}
                logp["T"] = float(np.log(p_delegate[i]))
                replies.append(Reply("T" if delegate else LABELS[greedy[i]], logp))
            elif query.kind == "decision":
                delegate = u[i] < p_delegate[i]
                replies.append(Reply(query.meta["delegate_label" if delegate else "answer_label"]))
            else:
                replies.append(Reply(self._second_chance(query, probs[i], int(greedy[i]))))
        return replies

    def _second_chance(self, query: Query, probs: np.ndarray, greedy: int) -> str:
        """Avoid the answer it knows (shown, or anticipated when redacted) if told it was wrong."""
        if query.meta["follow_up"] != "incorrect":
            return LABELS[greedy]
        shown = query.meta.get("shown_answer")
        avoid = LABELS.index(shown) if shown in LABELS else (greedy if self.agent.anticipates else None)
        if avoid is None:
            return LABELS[greedy]
        ranked = np.argsort(-probs)
        return LABELS[int(ranked[ranked != avoid][0])]
