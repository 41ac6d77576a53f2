"""One subject through every paradigm, resumably, and the analysis of its choices.

``play`` runs the capabilities test, the Delegate Game at each teammate accuracy (the same phase-1
history questions and phase-2 trials for each) and the Second Chance Game on the questions answered
wrongly, appending every answer to ``<folder>/<game>.jsonl``; ``analyse`` fits the delegation regressions.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from litlab.core.errors import ConfigError
from litlab.datamodules.metacog_questions import make_questions
from litlab.methods.metacog.analysis import delegation_regression
from litlab.methods.metacog.backends import Backend
from litlab.methods.metacog.games import (
    capabilities_queries,
    capabilities_table,
    change_rates,
    delegate_outcomes,
    delegate_queries,
    load_prompts,
    second_chance_queries,
)
from litlab.methods.metacog.store import run_queries


@dataclass
class GameConfig:
    """Sizes of a session: the question bank, the phase-1 history (50 in the blog, 100 in the code), the
    phase-2 trials per teammate accuracy, the variant, the Second Chance Game (on at most
    ``max_second_chance`` wrongly answered questions, all if None), the prompt folder."""

    n_questions: int = 700
    question_seed: int = 0
    max_digits: int = 4
    history_len: int = 50
    n_trials: int = 300
    teammate_accuracies: tuple[float, ...] = (0.5, 0.7)
    decision_only: bool = False
    second_chance: bool = True
    max_second_chance: int | None = None
    prompts: str | None = None
    batch_size: int = 64

    def __post_init__(self) -> None:
        if self.history_len + self.n_trials > self.n_questions:
            raise ConfigError(
                f"history_len + n_trials = {self.history_len + self.n_trials} exceeds "
                f"n_questions={self.n_questions}"
            )
        self.teammate_accuracies = tuple(self.teammate_accuracies)


def play(backend: Backend, config: GameConfig, folder: str | Path, seed: int = 0) -> dict[str, Any]:
    """Run (or resume) every game for ``backend``; returns the per-question and per-trial arrays."""
    folder = Path(folder)
    items = make_questions(config.n_questions, config.question_seed, config.max_digits)
    cap_prompts = load_prompts("capabilities", config.prompts)
    records = run_queries(
        backend, capabilities_queries(items, cap_prompts), folder / "capabilities.jsonl", config.batch_size
    )
    caps = capabilities_table(records, items)
    order = np.random.default_rng(seed).permutation(len(items))
    history, trials = order[: config.history_len], order[config.history_len :][: config.n_trials]
    prompts = load_prompts("delegate", config.prompts)
    columns: dict[str, list[np.ndarray]] = {}
    for accuracy in config.teammate_accuracies:
        queries, _ = delegate_queries(
            [items[i] for i in history],
            caps["correct"][history],
            [items[i] for i in trials],
            accuracy,
            seed,
            prompts,
            config.decision_only,
        )
        played = run_queries(backend, queries, folder / "delegate.jsonl", config.batch_size)
        out = delegate_outcomes(played, [items[i] for i in trials], caps["correct"][trials])
        out["teammate_accuracy"] = np.full(len(trials), accuracy)
        for name in ("correct", "max_prob", "entropy", "digits", "product", "log_length"):
            out[f"own_{name}" if name in ("correct", "max_prob", "entropy") else name] = caps[name][trials]
        for name, value in out.items():
            columns.setdefault(name, []).append(value)
    result: dict[str, Any] = {
        "capabilities": caps,
        "trials": {k: np.concatenate(v) for k, v in columns.items()},
    }
    if config.second_chance:
        wrong = np.flatnonzero(caps["parsed"] & ~caps["correct"])[: config.max_second_chance]
        queries = second_chance_queries(
            [items[i] for i in wrong],
            caps["label"][wrong].tolist(),
            cap_prompts,
            load_prompts("second_chance", config.prompts),
        )
        result["second_chance"] = change_rates(
            run_queries(backend, queries, folder / "second_chance.jsonl", config.batch_size)
        )
    return result


SIGNALS = ("own_max_prob", "own_correct", "own_entropy")


def share(values: np.ndarray) -> float:
    """The mean of the finite values (NaN when there are none, e.g. every reply unparseable)."""
    values = np.asarray(values, dtype=float)
    values = values[np.isfinite(values)]
    return float(values.mean()) if values.size else float("nan")


def analyse(
    played: dict[str, Any], n_boot: int = 300, seed: int = 0, controls: bool = True
) -> dict[str, Any]:
    """Summary numbers and, per self signal, the delegation regression with (or, ``controls=False``,
    without) the surface and teammate controls; none when the subject always or never delegates."""
    caps, t = played["capabilities"], played["trials"]
    summary = {
        "capabilities_accuracy": float(caps["correct"].mean()),
        "capabilities_unparsed": int((~caps["parsed"]).sum()),
        "delegate_trials": int(len(t["parsed"])),
        "delegate_unparsed": int((~t["parsed"]).sum()),
        "delegation_rate": share(t["delegated"][t["parsed"]]),
        "team_score": float(t["team_correct"].mean()),
        "baseline_accuracy": float(t["own_correct"].mean()),
        "self_answered_accuracy": float(
            t["self_correct"].sum() / max(1, (t["parsed"] & ~t["delegated"]).sum())
        ),
        "p_delegate_when_delegating": share(t["p_delegate"][t["delegated"]]),
        "p_delegate_when_answering": share(t["p_delegate"][t["parsed"] & ~t["delegated"]]),
    }
    keep = t["parsed"]
    surface = (
        {
            "log_length": t["log_length"][keep],
            "product": t["product"][keep].astype(float),
            "teammate_accuracy": t["teammate_accuracy"][keep],
        }
        if controls
        else {}
    )
    regressions = {}
    for signal in SIGNALS:
        values = t[signal][keep].astype(float)
        finite = np.isfinite(values)
        if finite.any() and np.ptp(values[finite]) > 0 and len(np.unique(t["delegated"][keep][finite])) == 2:
            regressions[signal] = delegation_regression(
                t["delegated"][keep], values, surface, t["digits"][keep] if controls else None, n_boot, seed
            )
    return {"summary": summary, "regressions": regressions}
