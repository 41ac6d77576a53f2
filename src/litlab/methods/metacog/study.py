"""Tasks: ``study`` (the simulated-agent validation the README quotes) and ``play`` (any subject: a local
checkpoint, an OpenAI-compatible endpoint or a simulated agent, resumable in its run folder)."""

from __future__ import annotations

from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from litlab.core.errors import ConfigError  # noqa: E402
from litlab.core.progress import track  # noqa: E402
from litlab.core.results import TaskOutput  # noqa: E402
from litlab.methods.metacog.agents import POLICIES, SimulatedAgent, SimulatedBackend  # noqa: E402
from litlab.methods.metacog.backends import Backend  # noqa: E402
from litlab.methods.metacog.session import GameConfig, analyse, play  # noqa: E402
from litlab.task import TaskContext  # noqa: E402

ALPHA = 0.05


def make_backend(
    kind: str,
    seed: int,
    policy: str = "positive",
    path: str | None = None,
    base_url: str | None = None,
    model: str | None = None,
    **options: Any,
) -> Backend:
    """A subject: ``simulated`` (a ``policy`` agent), ``local`` (the checkpoint at ``path``) or ``openai``
    (``model`` at ``base_url``); ``options`` go to the backend."""
    if kind == "simulated":
        return SimulatedBackend(SimulatedAgent(policy, seed=seed, **options))
    if kind == "local" and path:
        from litlab.methods.metacog.local import LocalLMBackend

        return LocalLMBackend.from_pretrained(path, **options)
    if kind == "openai" and base_url and model:
        from litlab.methods.metacog.openai_backend import OpenAIBackend

        return OpenAIBackend(base_url, model, **options)
    raise ConfigError(
        f"backend={kind!r} needs: simulated (policy), local (path) or openai (base_url and model)"
    )


def regression_rows(label: str, seed: int, analysis: dict[str, Any], controls: bool) -> list[dict[str, Any]]:
    """One table row per self signal."""
    return [
        {
            "subject": label,
            "seed": seed,
            "signal": signal,
            "controls": controls,
            **{k: round(v, 4) for k, v in reg.items()},
        }
        for signal, reg in analysis["regressions"].items()
    ]


def play_task(
    ctx: TaskContext,
    *,
    backend: str,
    game: dict[str, Any],
    policy: str = "positive",
    path: str | None = None,
    base_url: str | None = None,
    model: str | None = None,
    backend_options: dict[str, Any] | None = None,
    n_boot: int = 500,
) -> TaskOutput:
    """Every game for one subject (answers in ``<run>/answers/*.jsonl``; rerun with the same ``run_id`` to
    resume) and its delegation regressions with and without the controls. ``backend_options`` go to the
    backend (``top_logprobs: 0`` for an endpoint without log-probs, ``max_new_tokens``, agent parameters)."""
    subject = make_backend(backend, ctx.seed, policy, path, base_url, model, **(backend_options or {}))
    played = play(subject, GameConfig(**game), ctx.output_dir / "answers", ctx.seed)
    rows = []
    for controls in (True, False):
        result = analyse(played, n_boot, ctx.seed, controls)
        rows += regression_rows(subject.name, ctx.seed, result, controls)
    tables = {"regressions": rows, "second_chance": played.get("second_chance", [])}
    return {"metrics": result["summary"], "tables": tables}


def coefficient_plot(rows: list[dict[str, Any]], signal: str) -> plt.Figure:
    """The self-signal coefficient with its bootstrap interval per subject and seed, with/without controls."""
    figure, axes = plt.subplots(1, 2, figsize=(9, 3.5), sharey=True)
    for ax, controls in zip(axes, (True, False), strict=True):
        cell = [r for r in rows if r["signal"] == signal and r["controls"] == controls]
        subjects = list(dict.fromkeys(r["subject"] for r in cell))
        for i, subject in enumerate(subjects):
            mine = [r for r in cell if r["subject"] == subject]
            x = i + np.linspace(-0.2, 0.2, len(mine))
            y = np.array([r["coef"] for r in mine])
            if controls:
                err = np.array(
                    [[r["coef"] - r["ci_low"] for r in mine], [r["ci_high"] - r["coef"] for r in mine]]
                )
                ax.errorbar(x, y, yerr=err, fmt="o", capsize=3)
            else:
                ax.errorbar(x, y, yerr=1.96 * np.array([r["se"] for r in mine]), fmt="o", capsize=3)
        ax.axhline(0, color="grey", lw=0.8)
        ax.set_xticks(range(len(subjects)), subjects)
        ax.set_title(f"{signal}: {'with' if controls else 'without'} surface controls")
    axes[0].set_ylabel("logit coefficient per sd (95% interval)")
    figure.tight_layout()
    return figure


def study(
    ctx: TaskContext,
    *,
    seeds: list[int],
    policies: list[str],
    game: dict[str, Any],
    agent: dict[str, Any] | None = None,
    n_boot: int = 500,
) -> TaskOutput:
    """The three simulated subjects over ``seeds``: only the positive control should show a significant
    self-signal effect on delegation once the surface features are controlled for."""
    if unknown := set(policies) - set(POLICIES):
        raise ConfigError(f"unknown policies {sorted(unknown)}; choose from {POLICIES}")
    rows, summaries, second = [], [], []
    for policy, seed in track([(p, s) for p in policies for s in seeds], "metacog study"):
        subject = SimulatedBackend(SimulatedAgent(policy, seed=seed, **(agent or {})))
        played = play(subject, GameConfig(**game), ctx.output_dir / "answers" / f"{policy}-{seed}", seed)
        for controls in (True, False):
            result = analyse(played, n_boot if controls else 0, seed, controls)
            rows += regression_rows(policy, seed, result, controls)
        summaries.append(
            {"subject": policy, "seed": seed, **{k: round(v, 4) for k, v in result["summary"].items()}}
        )
        second += [{"subject": policy, "seed": seed, **r} for r in played.get("second_chance", [])]
    metrics, verdict = {}, []
    for policy in policies:
        for controls in (True, False):
            cell = [
                r
                for r in rows
                if r["subject"] == policy and r["controls"] == controls and r["signal"] == "own_max_prob"
            ]
            significant = sum(r["p"] < ALPHA for r in cell)
            tag = f"{policy}/{'controls' if controls else 'no_controls'}"
            metrics[f"{tag}/significant_share"] = significant / len(cell)
            metrics[f"{tag}/mean_coef"] = float(np.mean([r["coef"] for r in cell]))
            verdict.append(
                {
                    "subject": policy,
                    "controls": controls,
                    "seeds": len(cell),
                    "significant_at_0.05": significant,
                    "mean_coef": round(metrics[f"{tag}/mean_coef"], 3),
                    "mean_z": round(float(np.mean([r["z"] for r in cell])), 2),
                }
            )
    paper = [
        {
            "claim": "frontier LLMs use an internal confidence signal to delegate (beyond surface controls)",
            "paper": "yes, growing since early 2024, limited (no numbers available offline)",
            "ours": "not testable: no prompt-following LLM runs here; harness validated on simulated agents",
        },
        {
            "claim": "the analysis separates self-signal use from 'looks hard' heuristics",
            "paper": "answered by teammate manipulation and regression controls (blog)",
            "ours": "; ".join(
                f"{v['subject']}{'' if v['controls'] else ' (no controls)'}: "
                f"{v['significant_at_0.05']}/{v['seeds']} significant, mean z {v['mean_z']}"
                for v in verdict
            ),
        },
    ]
    return {
        "metrics": metrics,
        "tables": {
            "paper_vs_ours": paper,
            "separation": verdict,
            "regressions": rows,
            "summary": summaries,
            "second_chance": second,
        },
        "figures": {
            "coefficients_max_prob": coefficient_plot(rows, "own_max_prob"),
            "coefficients_correct": coefficient_plot(rows, "own_correct"),
        },
    }
