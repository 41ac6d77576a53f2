"""The Veracity Search study: per seed, a substrate LM (cached), VS and its baselines on three evaluation
sets (in-distribution, unseen ontologies, deeper proofs), AVI fine-tuned on VS pseudo-labels and used
zero-shot; step-level F1 and first-error localisation against gold labels, means with 95 % half-widths."""

from __future__ import annotations

import logging
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure

from litlab.core.progress import track
from litlab.core.results import TaskOutput
from litlab.core.stats import mean_and_half_width
from litlab.methods.veracity.hf_scorer import DEFAULT_TAGS, Reencoder, load_scorer
from litlab.methods.veracity.pipeline import EVAL_SETS, SearchSettings, run_seed
from litlab.methods.veracity.substrate import substrate_lm
from litlab.task import TaskContext

log = logging.getLogger("litlab")
METHODS = ["VS", "VS without answer", "AVI (zero-shot)", "per-step judging", "random", "all-true"]


def veracity_study(
    ctx: TaskContext,
    *,
    seeds: list[int],
    lm: dict[str, Any],
    eval_size: int = 150,
    avi_train_size: int = 300,
    avi_steps: int = 200,
    avi_lr: float = 1e-3,
    search: dict[str, Any] | None = None,
    scorer_path: str | None = None,
    scorer_tags: list[str] | None = None,
) -> TaskOutput:
    """Every seed × evaluation set × method; the summary, the paper-vs-ours table and a figure.

    ``scorer_path``: a local HF causal LM used as the scorer (and AVI's starting point) for every seed
    instead of the seed's substrate LM; ``scorer_tags``: its three single-token tag strings.
    """
    settings = SearchSettings(**(search or {}))
    scorer, encode = None, None
    if scorer_path is not None:
        scorer, tokenizer = load_scorer(scorer_path)
        encode = Reencoder(tokenizer, tuple(scorer_tags or DEFAULT_TAGS))
        log.info("veracity scorer: %s (%s)", scorer_path, type(scorer).__name__)
    runs: list[dict[str, Any]] = []
    for seed in track(seeds, "veracity study"):
        model = scorer if scorer is not None else substrate_lm(ctx.fitter, seed=seed, **lm)
        runs += run_seed(
            ctx.fitter, model, seed, eval_size, avi_train_size, avi_steps, avi_lr, settings, encode=encode
        )
        log.info("veracity seed %d done", seed)
    summary = []
    for name in EVAL_SETS:
        for method in METHODS:
            picked = [r for r in runs if r["set"] == name and r["method"] == method]
            row: dict[str, Any] = {"set": name, "method": method, "seeds": len(picked)}
            for key in ("f1", "localisation", "step_accuracy"):
                row[key], row[f"{key}_hw95"] = mean_and_half_width([r[key] for r in picked])
            summary.append(row)
    metrics = {f"{r['set']}/{r['method']}/{k}": r[k] for r in summary for k in ("f1", "localisation")}
    return {
        "metrics": metrics,
        "tables": {"paper_vs_ours": _paper_vs_ours(runs), "summary": summary, "runs": runs},
        "figures": {"localisation": _plot(summary)},
    }


def _paired(runs: list[dict], name: str, a: str, b: str, key: str) -> tuple[float, float]:
    """Mean and 95 % half-width over seeds of ``a − b`` on set ``name``."""
    value = {(r["seed"], r["method"]): r[key] for r in runs if r["set"] == name}
    seeds = sorted({s for s, _ in value})
    return mean_and_half_width([value[(s, a)] - value[(s, b)] for s in seeds])


def _paper_vs_ours(runs: list[dict]) -> list[dict[str, str]]:
    """The paper's qualitative claims beside the measured paired differences."""

    def text(name: str, a: str, b: str) -> str:
        parts = []
        for key in ("localisation", "f1"):
            mean, half = _paired(runs, name, a, b, key)
            parts.append(f"{key} {mean:+.3f} ± {half:.3f}")
        return f"{name}: " + ", ".join(parts)

    first = "in-distribution"
    return [
        {
            "claim": "VS identifies erroneous steps (vs per-step judging)",
            "paper": "VS reliably identifies errors on ProntoQA, GSM8K, CommonsenseQA (no numbers available)",
            "ours": text(first, "VS", "per-step judging"),
        },
        {
            "claim": "VS beats random tags",
            "paper": "(implied)",
            "ours": text(first, "VS", "random"),
        },
        {
            "claim": "the correct-answer term drives VS (ablation)",
            "paper": "reward = joint likelihood of veracity and the correct answer",
            "ours": text(first, "VS", "VS without answer"),
        },
        {
            "claim": "AVI approaches VS zero-shot on unseen ontologies (AVI − VS)",
            "paper": "AVI reaches comparable zero-shot accuracy",
            "ours": text("unseen ontologies", "AVI (zero-shot)", "VS"),
        },
        {
            "claim": "AVI approaches VS zero-shot on deeper proofs (AVI − VS)",
            "paper": "AVI reaches comparable zero-shot accuracy",
            "ours": text("deeper proofs", "AVI (zero-shot)", "VS"),
        },
    ]


def _plot(summary: list[dict]) -> Figure:
    """Localisation accuracy per evaluation set and method (bars: seed means, whiskers: 95 % half-widths)."""
    fig, ax = plt.subplots(figsize=(9, 3.6))
    width = 0.8 / len(METHODS)
    x = np.arange(len(EVAL_SETS))
    for i, method in enumerate(METHODS):
        rows = [r for r in summary if r["method"] == method]
        ax.bar(
            x + i * width,
            [r["localisation"] for r in rows],
            width,
            yerr=[r["localisation_hw95"] for r in rows],
            label=method,
        )
    ax.set_xticks(x + width * (len(METHODS) - 1) / 2, list(EVAL_SETS))
    ax.set_ylabel("first-error localisation accuracy")
    ax.legend(fontsize=7, ncol=3)
    fig.tight_layout()
    return fig
