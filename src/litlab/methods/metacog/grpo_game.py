"""The notes' substitute (b): a tiny LM trained with GRPO on the Delegate Game, team correctness the reward.

A tiny LM never writes ``T`` on its own (P(T) < 1e-5 after training on the questions), so GRPO could never
sample a delegation. It is first trained on the questions plus game-format documents whose assistant turn
is ``T`` or the right letter with probability 1/2 each, independent of the question, the history and the
teammate (a format-only cold start, as SFT before RL). Every later dependence of the choice on the teammate
or on the model's own confidence is learned by GRPO from the reward: the team's expected correctness (the
teammate's accuracy when the model delegates, its own answer's correctness otherwise; unparseable: wrong).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from litlab.core.cache import write_text_atomic
from litlab.core.paths import cache_dir, key_digest
from litlab.datamodules.metacog_questions import EOS, LABELS, make_questions, qa_document
from litlab.methods.metacog.games import DELEGATE, delegate_queries, load_prompts
from litlab.methods.metacog.parsing import parse_label

FORMAT_VERSION = 1
CHOICES = (*LABELS, DELEGATE)


def chat_document(messages: Sequence[dict[str, str]], reply: str) -> str:
    """The conversation and the assistant's ``reply`` as ``litlab.lm.DEFAULT_CHAT_TEMPLATE`` renders them
    (equality tested), so documents can be written before the tokenizer exists."""
    turns = [*messages, {"role": "assistant", "content": reply}]
    return "".join(f"<|{m['role']}|>\n{m['content']}{EOS}" for m in turns)


def game_records(
    items: Sequence[dict[str, Any]],
    own_correct: np.ndarray,
    accuracies: Sequence[float],
    history_len: int,
    n_trials: int,
    seed: int,
    prompts: dict[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """Delegate Game trials on ``items``: for each teammate accuracy, ``n_trials`` trials, each with its own
    seeded phase-1 history of ``history_len`` other items (``own_correct`` gives the subject's outcomes on
    them). Records: ``messages``, the right ``answer`` label, ``teammate_correct``, ``teammate_accuracy``."""
    prompts = prompts or load_prompts("delegate")
    rng = np.random.default_rng(seed)
    records = []
    for a, accuracy in enumerate(accuracies):
        for t in range(n_trials):
            pick = rng.choice(len(items), history_len + 1, replace=False)
            history, trial = pick[:-1], pick[-1]
            queries, mate = delegate_queries(
                [items[i] for i in history],
                own_correct[history],
                [items[trial]],
                accuracy,
                int(seed * 100_003 + a * 10_007 + t),
                prompts,
            )
            records.append(
                {
                    "messages": queries[0].messages,
                    "answer": LABELS[items[trial]["answer"]],
                    "teammate_correct": bool(mate[0]),
                    "teammate_accuracy": float(accuracy),
                }
            )
    return records


def format_corpus_file(
    n_questions: int,
    question_seed: int,
    max_digits: int,
    n_game: int,
    accuracies: Sequence[float],
    history_len: int,
    root: str | None = None,
) -> Path:
    """A cached JSONL of question documents plus ``n_game`` game-format documents per teammate accuracy
    (history outcomes drawn at random, the reply ``T`` or the right letter with probability 1/2 each)."""
    key = {
        "n": n_questions,
        "seed": question_seed,
        "max_digits": max_digits,
        "n_game": n_game,
        "accuracies": list(accuracies),
        "history_len": history_len,
        "version": FORMAT_VERSION,
    }
    folder = Path(root).expanduser() if root else cache_dir("metacog")
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"game-format-{key_digest(key)}.jsonl"
    if path.exists():
        return path
    items = make_questions(n_questions, question_seed, max_digits)
    rng = np.random.default_rng([question_seed, 7])
    own = rng.random(len(items)) < 0.3
    games = game_records(items, own, accuracies, history_len, n_game, question_seed + 1)
    replies = np.where(rng.random(len(games)) < 0.5, DELEGATE, [g["answer"] for g in games])
    docs = [qa_document(q) for q in items] + [chat_document(g["messages"], r) for g, r in zip(games, replies)]
    order = rng.permutation(len(docs))
    write_text_atomic(path, "".join(json.dumps({"text": docs[i]}) + "\n" for i in order))
    return path


def team_reward(
    prompts: list[str], completions: list[str], answer: list[str], teammate_accuracy: list[float], **_: Any
) -> torch.Tensor:
    """Expected team correctness per completion (TRL's reward signature): the teammate's accuracy when the
    completion delegates (``T``), else whether its label is the right one (unparseable: 0). The expectation
    replaces the game's predetermined teammate draw (same mean, less variance); a capabilities-test prompt
    is a trial with a teammate of accuracy 0 (delegating scores nothing)."""
    labels = [parse_label(text, CHOICES) for text in completions]
    return torch.tensor(
        [
            float(mate) if label == DELEGATE else float(label == right)
            for label, right, mate in zip(labels, answer, teammate_accuracy, strict=True)
        ]
    )
