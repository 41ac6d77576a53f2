"""Bases with and without AdaSpec on many data sets and seeds: per-run scores, paired differences, tables.

Seed ``s`` fixes the random split (or picks split file ``s mod 10``), the initial weights and the dropout
draws; a base and its AdaSpec variant see the same ones, so their per-seed scores are paired.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence

import pandas as pd
from scipy import stats

from litlab.core.results import TaskOutput
from litlab.datamodules.graphs import graph_set, load_node_graph
from litlab.methods.adaspec.module import NodeClassifier
from litlab.methods.adaspec.training import fit_full_batch
from litlab.task import TaskContext

log = logging.getLogger("litlab")
ModuleFactory = Callable[[], NodeClassifier]
ADASPEC_SUFFIX = "_adaspec"


def run_grid(
    models: dict[str, ModuleFactory],
    datasets: Sequence[str],
    seeds: Sequence[int],
    root: str | None = None,
    split: str = "random",
    train_rate: float = 0.025,
    val_rate: float = 0.025,
    max_epochs: int = 1000,
    patience: int = 200,
) -> pd.DataFrame:
    """Train every model on every data set for every seed; one row per run (score in [0, 1])."""
    rows = []
    for dataset in datasets:
        metric = "roc_auc" if graph_set(dataset).binary else "accuracy"
        for seed in seeds:
            graph = load_node_graph(
                dataset, root, split, train_rate, val_rate, split_index=seed % 10, seed=seed
            )
            for name, factory in models.items():
                result = fit_full_batch(factory(), graph, metric, max_epochs, patience, seed)
                rows.append(
                    dict(
                        dataset=dataset,
                        model=name,
                        seed=seed,
                        metric=metric,
                        test=result.test_score,
                        val=result.val_score,
                        best_epoch=result.best_epoch,
                        epochs=result.epochs,
                        seconds=result.seconds,
                    )
                )
                log.info(
                    "%s %s seed %d: test %.4f (%d epochs)",
                    dataset,
                    name,
                    seed,
                    result.test_score,
                    result.epochs,
                )
    return pd.DataFrame(rows)


def paired_differences(frame: pd.DataFrame, confidence: float = 0.95) -> pd.DataFrame:
    """For every ``<base>`` / ``<base>_adaspec`` pair and data set: mean scores, the mean per-seed
    difference (AdaSpec − base, in points) with a Student-t confidence interval, and AdaSpec's wins."""
    wide = frame.pivot_table(index=["dataset", "seed"], columns="model", values="test")
    rows = []
    for adaspec in [m for m in wide.columns if m.endswith(ADASPEC_SUFFIX)]:
        base = adaspec[: -len(ADASPEC_SUFFIX)]
        if base not in wide.columns:
            continue
        for dataset, group in wide[[base, adaspec]].dropna().groupby(level="dataset"):
            diff = 100 * (group[adaspec] - group[base])
            n = len(diff)
            half = (
                stats.t.ppf(0.5 + confidence / 2, n - 1) * diff.std(ddof=1) / math.sqrt(n)
                if n > 1
                else math.nan
            )
            rows.append(
                dict(
                    dataset=dataset,
                    base=base,
                    n=n,
                    base_mean=100 * group[base].mean(),
                    adaspec_mean=100 * group[adaspec].mean(),
                    diff_mean=diff.mean(),
                    ci_low=diff.mean() - half,
                    ci_high=diff.mean() + half,
                    wins=int((diff > 0).sum()),
                    ties=int((diff == 0).sum()),
                )
            )
    return pd.DataFrame(rows)


def score_table(frame: pd.DataFrame) -> pd.DataFrame:
    """The paper-style table: one row per model, one column per data set, ``mean ± std`` in points."""
    summary = frame.groupby(["model", "dataset"])["test"].agg(["mean", "std"]).mul(100)
    cells = summary.apply(
        lambda r: f"{r['mean']:.2f} ± {0.0 if math.isnan(r['std']) else r['std']:.2f}", axis=1
    )
    table = cells.unstack("dataset")
    order = [m for m in dict.fromkeys(frame["model"]) if m in table.index]
    return table.loc[order, list(dict.fromkeys(frame["dataset"]))]


def benchmark_task(
    ctx: TaskContext,
    models: dict[str, ModuleFactory],
    datasets: Sequence[str],
    seeds: Sequence[int],
    root: str | None = None,
    split: str = "random",
    train_rate: float = 0.025,
    val_rate: float = 0.025,
    max_epochs: int = 1000,
    patience: int = 200,
) -> TaskOutput:
    """``litlab-run task=adaspec/benchmark``: run the grid, write ``runs.csv``, ``table.md`` and
    ``paired.csv``, and return the mean AdaSpec − base difference per base (points) and overall."""
    output_dir = ctx.output_dir
    frame = run_grid(models, datasets, seeds, root, split, train_rate, val_rate, max_epochs, patience)
    output_dir.mkdir(parents=True, exist_ok=True)
    frame.to_csv(output_dir / "runs.csv", index=False)
    paired = paired_differences(frame)
    paired.to_csv(output_dir / "paired.csv", index=False)
    table = score_table(frame)
    (output_dir / "table.md").write_text(
        f"Test score (accuracy, or ROC-AUC for binary sets) in points, mean ± std over seeds {list(seeds)}; "
        f"split {split}.\n\n{table.to_markdown()}\n\nAdaSpec − base, per-seed paired:\n\n"
        f"{paired.round(2).to_markdown(index=False)}\n"
    )
    results = {f"diff/{base}": float(g["diff_mean"].mean()) for base, g in paired.groupby("base")}
    results["diff/mean"] = float(paired["diff_mean"].mean()) if len(paired) else math.nan
    log.info("\n%s\n%s", table.to_string(), paired.round(2).to_string(index=False))
    return {"metrics": results}
