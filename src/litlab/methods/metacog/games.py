"""The paradigms as query builders and scorers: the capabilities test, the Delegate Game (phase-1
history with a teammate of set accuracy, phase-2 decisions, the decision-only variant with alternating
labels) and the Second Chance Game with its neutral and positive controls. Prompts are YAML data files.
"""

from __future__ import annotations

from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from litlab.core.errors import ConfigError
from litlab.datamodules.metacog_questions import LABELS, question_text
from litlab.methods.metacog.backends import Query

DELEGATE = "T"
FOLLOW_UPS = ("incorrect", "neutral", "positive")


def load_prompts(name: str, folder: str | Path | None = None) -> dict[str, Any]:
    """The prompt templates ``<name>.yaml`` from ``folder`` (default: the shipped ``prompts/``)."""
    root = Path(folder) if folder else Path(str(resources.files("litlab.methods.metacog") / "prompts"))
    path = root / f"{name}.yaml"
    if not path.is_file():
        raise ConfigError(f"prompt file {path} not found")
    return yaml.safe_load(path.read_text())


def _messages(system: str | None, *turns: tuple[str, str]) -> tuple[dict[str, str], ...]:
    head = ({"role": "system", "content": system},) if system else ()
    return head + tuple({"role": role, "content": text} for role, text in turns)


def capabilities_queries(items: Sequence[dict[str, Any]], prompts: dict[str, Any]) -> list[Query]:
    """Step 0: each question alone (the backend answers at temperature 0)."""
    return [
        Query(
            f"cap/{q['id']}",
            "answer",
            _messages(prompts["system"], ("user", prompts["user"].format(question=question_text(q)))),
            LABELS,
            q,
        )
        for q in items
    ]


def label_probabilities(records: Sequence[dict[str, Any]], labels: Sequence[str] = LABELS) -> np.ndarray:
    """``(n, len(labels))`` the labels' probabilities renormalised over ``labels``; NaN rows where the
    backend gave no log-probs."""
    out = np.full((len(records), len(labels)), np.nan)
    for i, r in enumerate(records):
        if r["logprobs"]:
            logp = np.array([r["logprobs"].get(k, -np.inf) for k in labels])
            if np.isfinite(logp).any():
                out[i] = np.exp(logp - np.logaddexp.reduce(logp))
    return out


def capabilities_table(
    records: Sequence[dict[str, Any]], items: Sequence[dict[str, Any]]
) -> dict[str, np.ndarray]:
    """Per question: ``parsed``, ``correct`` (unparseable counts as wrong), ``max_prob`` and ``entropy``
    of the renormalised option probabilities (NaN without log-probs), and the surface features."""
    answer = np.array([LABELS[q["answer"]] for q in items])
    label = np.array([r["label"] or "" for r in records])
    probs = label_probabilities(records)
    with np.errstate(divide="ignore", invalid="ignore"):
        entropy = -np.nansum(probs * np.log(np.where(probs > 0, probs, 1)), 1)
    entropy[np.isnan(probs).any(1)] = np.nan
    return {
        "id": np.array([q["id"] for q in items]),
        "label": label,
        "parsed": label != "",
        "correct": label == answer,
        "max_prob": probs.max(1),
        "entropy": entropy,
        "digits": np.array([q["digits"] for q in items]),
        "product": np.array([q["op"] == "*" for q in items]),
        "log_length": np.log([q["length"] for q in items]),
    }


def teammate_history(n: int, accuracy: float, rng: np.random.Generator) -> np.ndarray:
    """Phase-1 teammate correctness: exactly round(accuracy·n) correct, in a seeded order."""
    return rng.permutation(np.arange(n) < round(accuracy * n))


def delegate_queries(
    history: Sequence[dict[str, Any]],
    history_correct: np.ndarray,
    trials: Sequence[dict[str, Any]],
    teammate_accuracy: float,
    seed: int,
    prompts: dict[str, Any],
    decision_only: bool = False,
) -> tuple[list[Query], np.ndarray]:
    """Phase-2 queries (each shows the same phase-1 history) and the teammate's predetermined correctness
    on each trial. ``history_correct`` is the subject's own capabilities-test correctness on ``history``.
    In the decision-only variant "1"/"2" swap meaning on every other trial."""
    if not 0 <= teammate_accuracy <= 1:
        raise ConfigError(f"teammate_accuracy={teammate_accuracy} must lie in [0, 1]")
    rng = np.random.default_rng([seed, round(teammate_accuracy * 1000)])
    mate_history = teammate_history(len(history), teammate_accuracy, rng)
    mate_trials = rng.random(len(trials)) < teammate_accuracy
    outcome = {True: prompts["outcome_correct"], False: prompts["outcome_incorrect"]}
    lines = [
        prompts["history_item"].format(
            question=question_text(q), own_outcome=outcome[bool(own)], teammate_outcome=outcome[bool(mate)]
        )
        for q, own, mate in zip(history, history_correct, mate_history, strict=True)
    ]
    shown = "\n\n".join([prompts["history_intro"], *lines])
    variant = "decision" if decision_only else "delegate"
    queries = []
    for t, q in enumerate(trials):
        meta: dict[str, Any] = {
            "teammate_accuracy": teammate_accuracy,
            "seed": seed,
            "trial": t,
            "teammate_correct": bool(mate_trials[t]),
        }
        if decision_only:
            answer_label, delegate_label = ("1", "2") if t % 2 == 0 else ("2", "1")
            meta |= {"answer_label": answer_label, "delegate_label": delegate_label}
            user = prompts["decision_user"].format(
                history=shown,
                question=question_text(q),
                answer_label=answer_label,
                delegate_label=delegate_label,
            )
            labels: tuple[str, ...] = ("1", "2")
        else:
            user = prompts["answer_user"].format(history=shown, question=question_text(q))
            labels = (*LABELS, DELEGATE)
        key = f"{variant}/t{teammate_accuracy:g}/s{seed}/{q['id']}"
        queries.append(Query(key, variant, _messages(prompts["system"], ("user", user)), labels, q, meta))
    return queries, mate_trials


def delegate_outcomes(
    records: Sequence[dict[str, Any]], trials: Sequence[dict[str, Any]], own_correct: np.ndarray
) -> dict[str, np.ndarray]:
    """Per phase-2 trial: ``parsed``, ``delegated``, ``p_delegate`` (P(T) renormalised over A–D and T, NaN
    without log-probs or in the decision-only variant), ``team_correct`` (the teammate's predetermined answer
    when delegated; unparseable counts as a wrong own answer) and ``self_correct`` (own answer right, if
    kept).
    ``own_correct``: the subject's capabilities correctness per trial (the decision-only variant's answer).
    """
    kind = records[0]["kind"] if records else "delegate"
    label = [r["label"] for r in records]
    mate = np.array([r["meta"]["teammate_correct"] for r in records], dtype=bool)
    if kind == "decision":
        delegated = np.array(
            [lab == r["meta"]["delegate_label"] for lab, r in zip(label, records, strict=True)]
        )
        self_correct = own_correct.astype(bool)
    else:
        delegated = np.array([lab == DELEGATE for lab in label])
        answers = [LABELS[q["answer"]] for q in trials]
        self_correct = np.array([lab == a for lab, a in zip(label, answers, strict=True)])
    parsed = np.array([lab is not None for lab in label])
    team = np.where(delegated, mate, self_correct & parsed)
    p_delegate = label_probabilities(records, (*LABELS, DELEGATE))[:, -1] if kind == "delegate" else None
    return {
        "parsed": parsed,
        "delegated": delegated & parsed,
        "team_correct": team,
        "self_correct": self_correct & parsed & ~delegated,
        "teammate_correct": mate,
        "p_delegate": np.full(len(records), np.nan) if p_delegate is None else p_delegate,
    }


def second_chance_queries(
    wrong: Sequence[dict[str, Any]],
    original: Sequence[str],
    prompts_cap: dict[str, Any],
    prompts: dict[str, Any],
) -> list[Query]:
    """For each question the subject got wrong (with its original label): the replay with the earlier turn
    shown or ``[redacted]``, under each follow-up (``incorrect``: the game; ``neutral``, ``positive``: the
    controls)."""
    queries = []
    for q, answer in zip(wrong, original, strict=True):
        user = prompts_cap["user"].format(question=question_text(q))
        for shown in (True, False):
            for follow in FOLLOW_UPS:
                turns = (
                    ("user", user),
                    ("assistant", answer if shown else prompts["redacted"]),
                    ("user", prompts["follow_up"][follow]),
                )
                meta = {
                    "shown": shown,
                    "follow_up": follow,
                    "original": answer,
                    "shown_answer": answer if shown else None,
                }
                key = f"second/{'shown' if shown else 'redacted'}/{follow}/{q['id']}"
                queries.append(
                    Query(key, "second_chance", _messages(prompts_cap["system"], *turns), LABELS, q, meta)
                )
    return queries


def change_rates(records: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows per (shown/redacted, follow-up): trials, unparseable replies, and the share of parsed replies
    that differ from the original answer (the Second Chance metric is the redacted/incorrect cell)."""
    rows = []
    for shown in (False, True):
        for follow in FOLLOW_UPS:
            cell = [r for r in records if r["meta"]["shown"] == shown and r["meta"]["follow_up"] == follow]
            parsed = [r for r in cell if r["label"] is not None]
            changed = sum(r["label"] != r["meta"]["original"] for r in parsed)
            rows.append(
                {
                    "earlier_answer": "shown" if shown else "redacted",
                    "follow_up": follow,
                    "trials": len(cell),
                    "unparsed": len(cell) - len(parsed),
                    "change_rate": changed / len(parsed) if parsed else float("nan"),
                }
            )
    return rows
