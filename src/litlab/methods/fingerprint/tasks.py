"""``litlab-run task=fingerprint/testbed``: build the tiny-LM lineage testbed, score every pair with AWM, its
ablations and the baselines (PCS, HuRef, REEF), and compare with the paper's claim (perfect separation, huge
Z for derived models)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from litlab.core.results import TaskOutput
from litlab.methods.fingerprint.evaluate import (
    METHODS,
    check_methods,
    read_pairs,
    score_figures,
    score_pairs,
    summarise,
)
from litlab.methods.fingerprint.testbed import POSITIVES, Spec, build_testbed
from litlab.task import TaskContext


def _paper_vs_ours(metrics: dict[str, float], categories: list[dict[str, Any]]) -> list[dict[str, Any]]:
    positives = [c for c in categories if c["label"] == 1]
    z_min = min(c["awm_z_min"] for c in positives)
    weakest = min(positives, key=lambda c: c["awm_z_min"])["category"]
    return [
        {"quantity": "AUC (AWM)", "paper": 1.0, "ours": metrics["awm/auc"]},
        {"quantity": "pAUC, FPR ≤ 0.1 (AWM)", "paper": 1.0, "ours": metrics["awm/pauc_fpr0.1"]},
        {"quantity": "TPR at lowest FPR (AWM)", "paper": 1.0, "ours": metrics["awm/tpr_at_lowest_fpr"]},
        {"quantity": "min Z over derived pairs", "paper": 12.1, "ours": z_min, "note": f"weakest: {weakest}"},
        {
            "quantity": "seconds per pair",
            "paper": 30.0,
            "ours": metrics["awm/seconds_per_pair"],
            "note": "paper: 7B models on an RTX 3090; ours: tiny models on one CPU core",
        },
    ]


def testbed(
    ctx: TaskContext,
    *,
    bases: Sequence[dict[str, Any]],
    spec: dict[str, Any] | None = None,
    categories: Sequence[str] = POSITIVES,
    extra_pairs: str | None = None,
    methods: Sequence[str] = tuple(METHODS),
    root: str | None = None,
) -> TaskOutput:
    """Build (cached) and evaluate the testbed; ``extra_pairs`` (a CSV of the same format) adds a user's
    own checkpoint pairs to the evaluation. The paper-vs-ours table (with ``awm`` among ``methods``) is
    of the testbed's own pairs, so that a user's pairs do not move the comparison with the paper."""
    methods = list(methods)
    check_methods(methods)
    extra = read_pairs(extra_pairs) if extra_pairs else []  # a bad file fails before the build
    built = score_pairs(
        read_pairs(build_testbed(ctx.fitter, list(bases), Spec(**dict(spec or {})), list(categories), root)),
        methods,
    )
    rows = built + score_pairs(extra, methods)
    metrics, method_rows, category_rows = summarise(rows, methods)
    metrics["pairs/positive"] = float(sum(r["label"] for r in rows))
    metrics["pairs/negative"] = float(sum(1 - r["label"] for r in rows))
    tables = {"methods": method_rows, "categories": category_rows, "pairs": rows}
    if "awm" in methods:
        built_metrics, _, built_categories = summarise(built, methods)
        tables = {"paper_vs_ours": _paper_vs_ours(built_metrics, built_categories)} | tables
    return {
        "metrics": {k: v for k, v in metrics.items() if not math.isnan(v)},
        "tables": tables,
        "figures": score_figures(rows, methods),
    }
