"""Score a pair list with AWM, its ablations and the baselines (PCS, HuRef-style invariants, REEF-style
representation CKA); detection metrics, seconds per pair, a plot.

Metrics per method: ROC AUC, the McClish-standardised partial AUC up to FPR 0.1 (scikit-learn's
``max_fpr``), and the TPR at the lowest FPR — the share of positives scoring above every negative (with few
negatives, the paper's TPR@1%FPR means exactly this). A score a method cannot compute (PCS across shapes)
counts as 0, unrelated.
"""

from __future__ import annotations

import csv
import math
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from litlab.core.errors import LitlabError
from litlab.core.progress import track
from litlab.methods.fingerprint.baselines import huref_invariants, pcs, reef
from litlab.methods.fingerprint.score import Options, awm_score

METHODS: dict[str, Options | None] = {
    "awm": Options(),
    "biased_cka": Options(unbiased=False),
    "no_assignment": Options(assignment=False),
    "no_sign": Options(sign=False),
    "no_layer_matching": Options(layer_matching=False),
    "pcs": None,
    "huref": None,
    "reef": None,
}
BASELINES = {"pcs": pcs, "huref": huref_invariants, "reef": reef}
PAIR_FIELDS = ("first", "second", "label", "category")


def read_pairs(path: str | os.PathLike) -> list[dict[str, Any]]:
    """Rows of a pairs CSV (first, second, label 1 = derived / 0 = independent, category); relative model
    paths are relative to the file."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise LitlabError(f"pair list {path} does not exist; give a CSV with columns {','.join(PAIR_FIELDS)}")
    with path.open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    missing = [f for f in PAIR_FIELDS if rows and f not in rows[0]]
    if not rows or missing:
        raise LitlabError(
            f"pair list {path}: needs columns {','.join(PAIR_FIELDS)} and rows (missing {missing})"
        )
    pairs = []
    for row in rows:
        first, second = (Path(row[k]).expanduser() for k in ("first", "second"))
        pairs.append(
            {
                "first": first if first.is_absolute() else path.parent / first,
                "second": second if second.is_absolute() else path.parent / second,
                "label": int(row["label"]),
                "category": row["category"],
            }
        )
    return pairs


def score_pairs(
    pairs: Sequence[dict[str, Any]], methods: Sequence[str] = tuple(METHODS)
) -> list[dict[str, Any]]:
    """One row per pair: its fields, every method's score, AWM's Z-score, AWM's and each baseline's
    seconds."""
    rows = []
    for pair in track(pairs, "fingerprint: scoring pairs"):
        row = {
            "first": pair["first"].name,
            "second": pair["second"].name,
            "label": pair["label"],
            "category": pair["category"],
        }
        for method in methods:
            if METHODS[method] is None:
                start = time.perf_counter()
                row[method] = BASELINES[method](pair["first"], pair["second"])
                row[f"{method}_seconds"] = time.perf_counter() - start
                continue
            result = awm_score(pair["first"], pair["second"], METHODS[method])
            row[method] = result.score
            if method == "awm":
                row["awm_z"], row["awm_seconds"] = result.z, result.seconds
        rows.append(row)
    return rows


def detection_metrics(labels: np.ndarray, scores: np.ndarray) -> dict[str, float]:
    """AUC, pAUC (FPR ≤ 0.1, standardised) and TPR at the lowest FPR of scores for binary labels."""
    from sklearn.metrics import roc_auc_score

    scores = np.nan_to_num(scores, nan=0.0)
    positives, negatives = scores[labels == 1], scores[labels == 0]
    return {
        "auc": float(roc_auc_score(labels, scores)),
        "pauc_fpr0.1": float(roc_auc_score(labels, scores, max_fpr=0.1)),
        "tpr_at_lowest_fpr": float((positives > negatives.max()).mean()),
        "margin": float(positives.min() - negatives.max()),
    }


def summarise(rows: Sequence[dict[str, Any]], methods: Sequence[str]) -> tuple[dict[str, float], list, list]:
    """Metrics per method (flat dict), a methods table and a per-category table (mean/min/max of each)."""
    labels = np.array([r["label"] for r in rows])
    if labels.min() == labels.max():
        raise LitlabError("the pair list needs both derived (label 1) and independent (label 0) pairs")
    metrics, method_rows = {}, []
    for method in methods:
        values = detection_metrics(labels, np.array([r[method] for r in rows], dtype=float))
        metrics.update({f"{method}/{k}": v for k, v in values.items()})
        method_rows.append({"method": method, **values})
    for method in methods:
        seconds = [r[f"{method}_seconds"] for r in rows if f"{method}_seconds" in r]
        if seconds:
            metrics[f"{method}/seconds_per_pair"] = float(np.mean(seconds))
            method_rows[methods.index(method)]["seconds_per_pair"] = float(np.mean(seconds))
    categories = []
    for category in dict.fromkeys(r["category"] for r in rows):
        group = [r for r in rows if r["category"] == category]
        entry: dict[str, Any] = {"category": category, "label": group[0]["label"], "pairs": len(group)}
        for method in methods:
            values = np.nan_to_num(np.array([r[method] for r in group], dtype=float), nan=0.0)
            entry[f"{method}_min"], entry[f"{method}_max"] = float(values.min()), float(values.max())
        if "awm_z" in group[0]:
            z = np.array([r["awm_z"] for r in group])
            entry["awm_z_mean"], entry["awm_z_min"] = float(z.mean()), float(z.min())
        categories.append(entry)
    return metrics, method_rows, categories


def score_plot(rows: Sequence[dict[str, Any]], methods: Sequence[str] = ("awm", "biased_cka", "pcs")) -> Any:
    """A strip plot of each method's scores per category (positives blue, negatives red)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    categories = list(dict.fromkeys(r["category"] for r in rows))
    figure, axes = plt.subplots(len(methods), 1, figsize=(10, 2.6 * len(methods)), sharex=True)
    rng = np.random.default_rng(0)
    for ax, method in zip(np.atleast_1d(axes), methods):
        for x, category in enumerate(categories):
            group = [r for r in rows if r["category"] == category]
            y = np.nan_to_num(np.array([r[method] for r in group], dtype=float), nan=0.0)
            color = "tab:blue" if group[0]["label"] == 1 else "tab:red"
            ax.scatter(x + rng.uniform(-0.15, 0.15, len(y)), y, s=12, color=color, alpha=0.8)
        ax.axhline(0.0, color="grey", lw=0.5)
        ax.set_ylabel(f"{method} score")
    ax.set_xticks(range(len(categories)), categories, rotation=40, ha="right")
    figure.suptitle("AWM lineage scores per category (blue: derived, red: independent)")
    figure.tight_layout()
    return figure


PLOTTED = ("awm", "biased_cka", "pcs", "huref", "reef")  # the methods whose scores the strip plot shows


def score_figures(rows: Sequence[dict[str, Any]], methods: Sequence[str]) -> dict[str, Any]:
    """``{"scores": strip plot}`` of the plotted methods among ``methods``; none when no such method ran."""
    shown = [m for m in PLOTTED if m in methods]
    return {"scores": score_plot(rows, shown)} if shown else {}


def check_methods(methods: Sequence[str]) -> None:
    """Fail in one line, before any model is built or read, on a method name that is not in METHODS."""
    unknown = sorted(set(methods) - set(METHODS))
    if unknown:
        raise LitlabError(f"task.methods has unknown {unknown}; choose among {', '.join(METHODS)}")


def evaluate(
    ctx: Any, *, pairs: str | None = None, methods: Sequence[str] = tuple(METHODS)
) -> dict[str, Any]:
    """Task: score a user's pair list (``litlab-run task=fingerprint/evaluate task.pairs=my_pairs.csv``)."""
    if not pairs:
        raise LitlabError(f"task.pairs=<csv> is required: a file with columns {','.join(PAIR_FIELDS)}")
    check_methods(methods)
    rows = score_pairs(read_pairs(pairs), methods)
    metrics, method_rows, categories = summarise(rows, methods)
    return {
        "metrics": {k: v for k, v in metrics.items() if not math.isnan(v)},
        "tables": {"methods": method_rows, "categories": categories, "pairs": rows},
        "figures": score_figures(rows, methods),
    }
