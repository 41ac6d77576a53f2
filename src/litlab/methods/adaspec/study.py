"""``litlab-run task=adaspec/study``: bases with and without AdaSpec, AdaSpec's ablations and the trivial
baselines, on the same splits and seeds, with seed-level intervals and the labels the README quotes.

Every arm is a model config (a factory of fresh ``NodeClassifier``s) trained through ``ctx.fitter`` with
the paper's protocol (``training.fit_node_classifier``); ``majority`` is the labelled-majority baseline
(``baselines.py``). The same function runs the paper-style grid (``task=adaspec/benchmark``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from litlab.core.errors import ConfigError
from litlab.core.progress import track
from litlab.core.results import TaskOutput
from litlab.datamodules.graphs import evidence_unit, graph_set, load_node_graph
from litlab.methods.adaspec.baselines import majority_class_score
from litlab.methods.adaspec.evidence import (
    POOLED,
    label,
    overall_label,
    paired_differences,
    summarise,
    unit_means,
)
from litlab.methods.adaspec.module import NodeClassifier
from litlab.methods.adaspec.training import fit_node_classifier
from litlab.task import TaskContext

log = logging.getLogger("litlab")
ModuleFactory = Callable[[], NodeClassifier]
MAJORITY = "majority"

# The paper's numbers we can set beside ours (its Table 2, 10 runs, tuned hyperparameters), in points.
PAPER_SCORES = {
    ("texas", "chebnet"): 38.67,
    ("texas", "chebnet_adaspec"): 51.16,
    ("texas", "gprgnn"): 48.15,
    ("texas", "gprgnn_adaspec"): 58.27,
}
PAPER_MEAN_GAIN = (3.45, "the paper's mean AdaSpec gain over its five bases on Texas, Wisconsin, Cornell")
OVERALL = "overall: AdaSpec improves the base models"


def is_gain(arm: str, reference: str) -> bool:
    """True for a base-with-AdaSpec against its own base (``<base>_adaspec`` vs ``<base>``)."""
    return arm == f"{reference}_adaspec"


def run_arms(
    ctx: TaskContext,
    arms: Mapping[str, ModuleFactory],
    datasets: Sequence[str],
    seeds: Sequence[int],
    majority: bool = True,
    root: str | None = None,
    split: str = "random",
    train_rate: float = 0.025,
    val_rate: float = 0.025,
    max_epochs: int = 1000,
    patience: int = 200,
) -> pd.DataFrame:
    """Train every arm on every data set for every seed (seed = split = initialisation); one row per run,
    scores in [0, 1], plus the majority baseline's row per data set and seed when ``majority``."""
    if MAJORITY in arms:
        raise ConfigError(f"arm name {MAJORITY!r} is reserved for the majority-class baseline")
    rows = []
    jobs = [(dataset, seed) for dataset in datasets for seed in seeds]
    for dataset, seed in track(jobs, description="adaspec study"):
        metric = graph_set(dataset).metric
        graph = load_node_graph(dataset, root, split, train_rate, val_rate, split_index=seed % 10, seed=seed)
        common = dict(dataset=dataset, unit=evidence_unit(dataset), seed=seed, metric=metric)
        if majority:
            score = majority_class_score(graph, metric)
            rows.append(
                dict(common, arm=MAJORITY, test=score, val=np.nan, best_epoch=-1, epochs=0, seconds=0.0)
            )
        for name, factory in arms.items():
            fit = fit_node_classifier(ctx.fitter, factory(), graph, metric, max_epochs, patience, seed)
            rows.append(
                dict(
                    common,
                    arm=name,
                    test=fit.test_score,
                    val=fit.val_score,
                    best_epoch=fit.best_epoch,
                    epochs=fit.epochs,
                    seconds=fit.seconds,
                )
            )
            log.info("%s seed %d %s: test %.4f (%d epochs)", dataset, seed, name, fit.test_score, fit.epochs)
    return pd.DataFrame(rows)


def score_table(summary: pd.DataFrame) -> pd.DataFrame:
    """The paper-style table: one row per arm, one column per data set, ``mean ± half-interval``."""
    cells = summary.assign(
        cell=[f"{m:.2f} ± {(h - m):.2f}" for m, h in zip(summary["mean"], summary["ci_high"], strict=True)]
    )
    table = cells.pivot(index="arm", columns="dataset", values="cell")
    arms = list(dict.fromkeys(summary["arm"]))
    return table.loc[arms, list(dict.fromkeys(summary["dataset"]))].reset_index()


def paper_vs_ours(
    summary: pd.DataFrame, paired: pd.DataFrame, claims: Mapping[str, Sequence[str]]
) -> list[dict]:
    """Rows setting the paper's numbers beside ours (mean and interval over seeds, points)."""
    rows = []
    for (dataset, arm), paper in PAPER_SCORES.items():
        match = summary[(summary["dataset"] == dataset) & (summary["arm"] == arm)]
        if len(match):
            ours = match.iloc[0]
            rows.append(
                dict(
                    quantity=f"{arm} accuracy on {dataset}",
                    paper=paper,
                    ours=ours["mean"],
                    ci_low=ours["ci_low"],
                    ci_high=ours["ci_high"],
                    seeds=int(ours["seeds"]),
                )
            )
    for arm, reference in claims.values():
        match = paired[
            (paired["arm"] == arm) & (paired["reference"] == reference) & (paired["dataset"] == POOLED)
        ]
        if len(match):
            ours = match.iloc[0]
            rows.append(
                dict(
                    quantity=f"{arm} − {reference}, pooled (paper: {PAPER_MEAN_GAIN[1]})",
                    paper=PAPER_MEAN_GAIN[0],
                    ours=ours["diff"],
                    ci_low=ours["ci_low"],
                    ci_high=ours["ci_high"],
                    seeds=int(ours["seeds"]),
                )
            )
    return rows


def verdicts(
    paired: pd.DataFrame, claims: Mapping[str, Sequence[str]], units: Mapping[str, str]
) -> list[dict]:
    """One row per claim ``arm beats reference`` (pooled difference, unit means, ``evidence.label``), then
    the headline row from the AdaSpec-versus-base claims (``evidence.overall_label``)."""
    rows = []
    for name, (arm, reference) in claims.items():
        comparison = f"{arm} − {reference}"
        pooled = paired[(paired["comparison"] == comparison) & (paired["dataset"] == POOLED)]
        if not len(pooled):
            continue
        row = pooled.iloc[0]
        means = unit_means(paired, comparison, units)
        rows.append(
            dict(
                claim=name,
                comparison=comparison,
                pooled=row["diff"],
                ci_low=row["ci_low"],
                ci_high=row["ci_high"],
                unit_means=" ".join(f"{m:+.2f}" for m in means),
                label=label(row["ci_low"], row["ci_high"], means),
            )
        )
    gains = [r["label"] for r in rows if is_gain(*claims[r["claim"]])]
    if gains:
        rows.append(
            dict(claim=OVERALL, comparison="every <base>_adaspec − <base> above", label=overall_label(gains))
        )
    return rows


def differences_figure(paired: pd.DataFrame) -> Figure:
    """Forest plot: each comparison's mean paired difference and interval, per data set and pooled."""
    datasets = list(dict.fromkeys(paired["dataset"]))
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    fig, ax = plt.subplots(figsize=(8, 1 + 0.22 * len(paired)))
    ticks, labels, y = [], [], 0.0
    for comparison, group in paired.groupby("comparison", sort=False):
        for r in group.to_dict(orient="records"):
            index = datasets.index(r["dataset"])
            error = [[r["diff"] - r["ci_low"]], [r["ci_high"] - r["diff"]]]
            marker = "D" if r["dataset"] == POOLED else "o"
            ax.errorbar(r["diff"], y, xerr=error, fmt=marker, color=colours[index % len(colours)], capsize=2)
            ticks.append(y)
            labels.append(f"{comparison} | {r['dataset']}")
            y -= 1
        y -= 0.6
    ax.axvline(0, color="grey", lw=0.8)
    ax.set_yticks(ticks)
    ax.set_yticklabels(labels, fontsize=7)
    ax.set_xlabel("paired difference in test score (points): mean and 95% interval over seeds")
    fig.tight_layout()
    return fig


def study(
    ctx: TaskContext,
    *,
    arms: Mapping[str, ModuleFactory],
    datasets: Sequence[str],
    seeds: Sequence[int],
    comparisons: Sequence[Sequence[str]],
    claims: Mapping[str, Sequence[str]],
    majority: bool = True,
    root: str | None = None,
    split: str = "random",
    train_rate: float = 0.025,
    val_rate: float = 0.025,
    max_epochs: int = 1000,
    patience: int = 200,
    confidence: float = 0.95,
) -> TaskOutput:
    """Run every arm on every data set and seed; return the tables ``runs``, ``summary``, ``scores``,
    ``paired``, ``paper_vs_ours`` and ``verdicts``, the forest plot, and the pooled differences.

    It runs on one CPU thread unless ``extras.torch_threads`` says otherwise: graphs of a few hundred
    nodes gain nothing from more, a thread pool thrashes on a loaded machine, and one thread makes the
    float sums, and so the published numbers, the same on every machine.
    """
    ctx.pin_threads(1)
    known = set(arms) | ({MAJORITY} if majority else set())
    pairs = [tuple(pair) for pair in claims.values()] + [tuple(pair) for pair in comparisons]
    unknown = sorted({arm for pair in pairs for arm in pair} - known)
    if unknown or any(len(pair) != 2 for pair in pairs):
        raise ConfigError(
            f"task.comparisons/claims must be [arm, reference] pairs of arms among {sorted(known)}; "
            f"unknown: {unknown}"
        )
    runs = run_arms(
        ctx, arms, datasets, seeds, majority, root, split, train_rate, val_rate, max_epochs, patience
    )
    units = {dataset: evidence_unit(dataset) for dataset in datasets}
    summary = summarise(runs, confidence)
    paired = paired_differences(runs, list(dict.fromkeys(pairs)), units, confidence)
    verdict_rows = verdicts(paired, claims, units)
    metrics = {f"{r['dataset']}/{r['arm']}/mean": r["mean"] for r in summary.to_dict(orient="records")}
    for r in paired[paired["dataset"] == POOLED].to_dict(orient="records"):
        for key in ("diff", "ci_low", "ci_high"):
            metrics[f"pooled/{r['arm']}-{r['reference']}/{key}"] = r[key]
    for r in verdict_rows:
        log.info("%s (%s): %s", r["claim"], r["comparison"], r["label"])
    return {
        "metrics": metrics,
        "tables": {
            "runs": runs,
            "summary": summary,
            "scores": score_table(summary),
            "paired": paired,
            "paper_vs_ours": paper_vs_ours(summary, paired, claims),
            "verdicts": verdict_rows,
        },
        "figures": {"paired_differences": differences_figure(paired)},
    }
