"""Procedural multiple-choice questions for the metacognition games, and a text corpus of them.

Each item asks for the result of ``a + b`` or ``a × b`` with four options (A–D): the answer and three
near misses (the answer ± 1, 2 and 10), so that a model that half-knows the result hesitates between
close options. The surface difficulty features a "looks hard" heuristic could use are the first operand's
size ``digits`` (1–4; a product's second factor has at most two digits), the operation and the question's
character length. Seeded, vectorised.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from litlab.core.cache import write_text_atomic
from litlab.core.errors import ConfigError
from litlab.core.paths import cache_dir, key_digest
from litlab.datamodules.text import TextDataModule

QUESTIONS_VERSION = 3
LABELS = ("A", "B", "C", "D")
OPS = ("+", "*")


def make_questions(n: int, seed: int, max_digits: int = 4) -> list[dict[str, Any]]:
    """``n`` seeded four-option arithmetic questions; each a dict with ``id``, ``question``, ``options``
    (4 strings), ``answer`` (index of the right option), ``digits``, ``op`` and ``length``."""
    if n < 1 or not 1 <= max_digits <= 6:
        raise ConfigError(f"n={n} must be >= 1 and max_digits={max_digits} in 1..6")
    rng = np.random.default_rng(seed)
    digits = rng.integers(1, max_digits + 1, n)
    op = rng.integers(0, 2, n)
    low, high = np.where(digits == 1, 0, 10 ** (digits - 1)), 10**digits
    a, b = rng.integers(low, high), rng.integers(low, high)
    b = np.where(op == 1, np.minimum(b, 99), b)  # products stay readable: one factor of at most two digits
    value = np.where(op == 0, a + b, a * b)
    # near misses at distinct distances 1, 2 and 10 (never equal), above the answer where below would be < 0
    magnitude = rng.permuted(np.tile([1, 2, 10], (n, 1)), axis=1)
    offsets = magnitude * rng.choice([-1, 1], (n, 3))
    offsets = np.where(value[:, None] + offsets < 0, magnitude, offsets)
    options = np.concatenate([value[:, None], value[:, None] + offsets], 1)
    order = rng.permuted(np.tile(np.arange(4), (n, 1)), axis=1)
    shuffled = np.take_along_axis(options, order, 1)
    answer = np.argmax(order == 0, 1)
    items = []
    for i in range(n):
        question = f"What is {a[i]} {OPS[op[i]]} {b[i]}?"
        items.append(
            {
                "id": i,
                "question": question,
                "options": [str(v) for v in shuffled[i]],
                "answer": int(answer[i]),
                "digits": int(digits[i]),
                "op": OPS[op[i]],
                "length": len(question),
            }
        )
    return items


def question_text(item: dict[str, Any]) -> str:
    """The question with its lettered options, as every prompt shows it."""
    options = "\n".join(f"{label}) {text}" for label, text in zip(LABELS, item["options"], strict=True))
    return f"{item['question']}\n{options}"


# The capabilities prompt (methods/metacog/prompts/capabilities.yaml; equality tested) and the text
# litlab.lm.chat.DEFAULT_CHAT_TEMPLATE renders for it (tested): a tiny LM trained on these documents meets
# the capabilities test in the format it was trained on.
SYSTEM = "You are taking a multiple-choice test. Answer with the letter of the correct option only."
USER = "{question}\nAnswer:"
EOS = "<|endoftext|>"


def qa_document(item: dict[str, Any], system: str = SYSTEM, user: str = USER) -> str:
    """A training document: the capabilities conversation with the right letter as the assistant's turn."""
    turns = [
        ("system", system),
        ("user", user.format(question=question_text(item))),
        ("assistant", LABELS[item["answer"]]),
    ]
    return "".join(f"<|{role}|>\n{text}{EOS}" for role, text in turns)


def qa_corpus_file(n: int, seed: int, max_digits: int = 4, root: str | None = None) -> Path:
    """A cached JSONL file of ``n`` question documents (field ``text``), written once per config."""
    key = {"n": n, "seed": seed, "max_digits": max_digits, "version": QUESTIONS_VERSION}
    folder = Path(root).expanduser() if root else cache_dir("metacog")
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"questions-{key_digest(key)}.jsonl"
    if not path.exists():
        lines = [json.dumps({"text": qa_document(q), **q}) for q in make_questions(n, seed, max_digits)]
        write_text_atomic(path, "\n".join(lines) + "\n")
    return path


class MetacogQADataModule(TextDataModule):
    """Packed question–answer documents (``qa_document``) for training a tiny LM that later plays the games.

    Args: ``n_questions``, ``question_seed`` and ``max_digits`` make the bank (use another ``question_seed``
    than the games' bank to keep the played questions unseen); the rest as ``TextDataModule``.
    """

    def __init__(
        self, n_questions: int = 4000, question_seed: int = 0, max_digits: int = 4, **text: Any
    ) -> None:
        path = qa_corpus_file(n_questions, question_seed, max_digits, text.get("cache_dir"))
        super().__init__(corpus=str(path), **text)
