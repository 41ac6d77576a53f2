"""Seed-level statistics behind AdaSpec's README: per-arm means with Student-t intervals, paired differences
between arms (per data set, and pooled over independent units), and the rule that turns them into labels.

Seed ``s`` fixes the split, the initial weights and the dropout draws, so two arms on the same data set and
seed are paired. Texas and Cornell have byte-identical feature and label files (they differ only in their
edges), so the pooled difference first averages them into one unit (``datamodules.graphs.evidence_unit``)
and then averages the units: the shared feature set is counted once.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from litlab.core.stats import mean_and_half_width

POOLED = "pooled"
# A run whose lowest validation loss came in its first epochs predicts (nearly) one class: selection fell
# on an untrained model. Counted per arm, since it explains most of the spread on WebKB.
COLLAPSE_EPOCHS = 10


def t_interval(values: Sequence[float], confidence: float = 0.95) -> tuple[float, float, float]:
    """``(mean, low, high)``: the two-sided Student-t interval of the mean (NaN bounds for fewer than 2)."""
    mean, half = mean_and_half_width(values, confidence)
    return mean, mean - half, mean + half


def summarise(runs: pd.DataFrame, confidence: float = 0.95) -> pd.DataFrame:
    """One row per (dataset, arm): seeds, mean/std of the test score in points, its interval over seeds,
    and the fraction of runs that selected an epoch before ``COLLAPSE_EPOCHS``."""
    rows = []
    for (dataset, arm), group in runs.groupby(["dataset", "arm"], sort=False):
        score = 100 * group["test"]
        mean, low, high = t_interval(score, confidence)
        rows.append(
            dict(
                dataset=dataset,
                arm=arm,
                seeds=len(group),
                mean=mean,
                std=float(score.std(ddof=1)) if len(group) > 1 else math.nan,
                ci_low=low,
                ci_high=high,
                collapsed=collapsed_share(group["best_epoch"]),
            )
        )
    return pd.DataFrame(rows)


def collapsed_share(best_epoch: pd.Series) -> float:
    """Share of trained runs (``best_epoch`` ≥ 0) that selected an epoch before ``COLLAPSE_EPOCHS``;
    NaN for an arm that does not train (the majority baseline)."""
    trained = best_epoch[best_epoch >= 0]
    return float((trained < COLLAPSE_EPOCHS).mean()) if len(trained) else math.nan


def paired_differences(
    runs: pd.DataFrame,
    comparisons: Sequence[tuple[str, str]],
    units: Mapping[str, str],
    confidence: float = 0.95,
) -> pd.DataFrame:
    """For each ``(arm, reference)``: the per-seed difference ``arm − reference`` in points per data set
    (mean, interval over seeds, wins/ties/losses) and ``pooled``: per seed, data sets averaged within their
    unit (``units[dataset]``), then units averaged; the interval is over seeds."""
    wide = runs.pivot_table(index=["dataset", "seed"], columns="arm", values="test", sort=False)
    rows = []
    for arm, reference in comparisons:
        if arm not in wide.columns or reference not in wide.columns:
            continue
        diff = (100 * (wide[arm] - wide[reference])).dropna()
        for dataset, values in diff.groupby(level="dataset", sort=False):
            row = _difference_row(arm, reference, dataset, values.to_numpy(), confidence)
            rows.append(dict(row, units=1))
        per_dataset = diff.unstack("dataset")
        per_unit = per_dataset.T.groupby(lambda dataset: units[dataset], sort=False).mean().T
        pooled = per_unit.dropna().mean(axis=1).to_numpy()
        row = _difference_row(arm, reference, POOLED, pooled, confidence)
        rows.append(dict(row, units=per_unit.shape[1]))
    return pd.DataFrame(rows)


def _difference_row(
    arm: str, reference: str, dataset: str, diff: np.ndarray, confidence: float
) -> dict[str, object]:
    mean, low, high = t_interval(diff, confidence)
    return dict(
        comparison=f"{arm} − {reference}",
        arm=arm,
        reference=reference,
        dataset=dataset,
        seeds=len(diff),
        diff=mean,
        ci_low=low,
        ci_high=high,
        wins=int((diff > 0).sum()),
        ties=int((diff == 0).sum()),
        losses=int((diff < 0).sum()),
    )


def label(pooled_low: float, pooled_high: float, unit_means: Sequence[float]) -> str:
    """The README's label for "arm beats reference", fixed before the study was run:
    ``reproduced``: the pooled interval lies above 0 and every independent unit's mean difference is
    positive; ``partly``: the pooled interval lies above 0 but some unit's mean is not positive;
    ``not reproduced``: the pooled interval reaches 0 (``reversed`` when it lies below 0)."""
    if pooled_high < 0:
        return "reversed"
    if not pooled_low > 0:
        return "not reproduced"
    return "reproduced" if all(m > 0 for m in unit_means) else "partly"


def overall_label(gain_labels: Sequence[str]) -> str:
    """The label of the paper's headline claim, "AdaSpec improves the base models", from the labels of
    each base's ``<base>_adaspec − <base>`` claim: ``reproduced`` if every one is; ``partly`` if at
    least one is reproduced or partly; else ``not reproduced``."""
    if gain_labels and all(g == "reproduced" for g in gain_labels):
        return "reproduced"
    if any(g in ("reproduced", "partly") for g in gain_labels):
        return "partly"
    return "not reproduced"


def unit_means(paired: pd.DataFrame, comparison: str, units: Mapping[str, str]) -> list[float]:
    """Mean difference of each independent unit (its data sets averaged) for one comparison."""
    rows = paired[(paired["comparison"] == comparison) & (paired["dataset"] != POOLED)]
    by_unit: dict[str, list[float]] = {}
    for dataset, diff in zip(rows["dataset"], rows["diff"], strict=True):
        by_unit.setdefault(units[dataset], []).append(float(diff))
    return [float(np.mean(v)) for v in by_unit.values()]
