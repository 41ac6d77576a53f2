"""The OBS-Diff study: OBS-Diff against Wanda, magnitude and SparseGPT (uniform timestep weights) on the
cached tiny DiT, over calibration seeds and sparsities, judged against the dense model on one fixed
evaluation set. Arms of one seed share its calibration set, so arms are compared seed by seed (paired
differences with a 95 % Student-t interval over seeds)."""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Any

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.figure import Figure

from litlab.core.errors import ConfigError
from litlab.core.progress import track
from litlab.core.results import TaskOutput
from litlab.core.stats import mean_and_half_width
from litlab.methods.obsdiff.pipeline import judge, pruned_copy, reference, sample_grid
from litlab.methods.obsdiff.prune import PruneSpec
from litlab.methods.obsdiff.targets import trained_classifier, trained_dit
from litlab.methods.obsdiff.tasks import parse_nm
from litlab.task import TaskContext

METRICS = (
    "image_mse",
    "psnr",
    "class_acc",
    "class_agree",
    "kid",
    "eps_mse_early",
    "eps_mse_late",
    "prune_seconds",
)
# (claim, arm, reference arm, metric, lower is better, the paper's number)
CLAIMS = (
    (
        "OBS-Diff beats Wanda (image error)",
        "obs_diff",
        "wanda",
        "image_mse",
        True,
        "SD3-Medium 50%: FID 27.20 vs 43.98",
    ),
    (
        "OBS-Diff beats magnitude (image error)",
        "obs_diff",
        "magnitude",
        "image_mse",
        True,
        "SD3-Medium 50%: FID 27.20 vs 221",
    ),
    (
        "OBS-Diff beats Wanda (class accuracy)",
        "obs_diff",
        "wanda",
        "class_acc",
        False,
        "SD3-Medium 50%: ImageReward 0.647 vs -0.108",
    ),
    (
        "OBS-Diff beats magnitude (class accuracy)",
        "obs_diff",
        "magnitude",
        "class_acc",
        False,
        "magnitude collapses (FID 221)",
    ),
    (
        "OBS-Diff keeps the dense samples' classes better than Wanda",
        "obs_diff",
        "wanda",
        "class_agree",
        False,
        "SD3-Medium 50%: ImageReward 0.647 vs -0.108 (dense 0.903)",
    ),
    (
        "OBS-Diff keeps the dense samples' classes better than magnitude",
        "obs_diff",
        "magnitude",
        "class_agree",
        False,
        "magnitude collapses (FID 221)",
    ),
    (
        "OBS-Diff's per-step eps error is below Wanda's (early, noisy steps)",
        "obs_diff",
        "wanda",
        "eps_mse_early",
        True,
        "not reported (the mechanism: less error carried into later steps)",
    ),
    (
        "log-decrease weights beat uniform (SparseGPT) weights (image error)",
        "obs_diff",
        "sparsegpt_uniform",
        "image_mse",
        True,
        "reported as the better schedule; gap not isolated in the numbers we have",
    ),
    (
        "K=4 groups vs one group (image error)",
        "obs_diff",
        "obs_diff_k1",
        "image_mse",
        True,
        "groups amortise calibration; quality effect not reported",
    ),
)


def run_arms(
    ctx: TaskContext,
    arms: Mapping[str, Mapping[str, Any]],
    seeds: Sequence[int],
    sparsities: Sequence[float],
    n_calibration: int,
    steps: int,
    guidance: float,
    eval_samples: int,
    dit: Mapping[str, Any] | None,
    nm: str | None = None,
) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Prune and judge every (sparsity, arm, seed); seed-free arms (magnitude) run once per sparsity."""
    dense = trained_dit(ctx.fitter, dit)
    classifier = trained_classifier(ctx.fitter, dit)
    ref = reference(dense, classifier, eval_samples, steps, guidance)
    dense_metrics, _ = judge(dense, ref, classifier)
    rows, grids = [], {"dense": ref.images}
    cells = list(itertools.product(sparsities, arms.items(), seeds))
    cache: dict[tuple[float, str], dict[str, float]] = {}
    for sparsity, (arm, params), seed in track(cells, "obsdiff study", total=len(cells)):
        spec = PruneSpec(sparsity=sparsity, **dict(zip("nm", parse_nm(nm), strict=True)), **params)
        seedless = spec.method == "magnitude"
        if not (seedless and (sparsity, arm) in cache):
            model, report = pruned_copy(dense, spec, n_calibration, seed, steps, guidance)
            metrics, images = judge(model, ref, classifier)
            cache[(sparsity, arm)] = {**metrics, "prune_seconds": report.seconds}
            if seed == seeds[0] and sparsity == sparsities[0]:
                grids[arm] = images
        rows.append({"sparsity": float(sparsity), "arm": arm, "seed": seed, **cache[(sparsity, arm)]})
    return pd.DataFrame(rows), {"dense_metrics": dense_metrics, "grids": grids}


def summarise(runs: pd.DataFrame) -> list[dict[str, Any]]:
    """Mean ± 95 % half-width over seeds of every metric, per sparsity and arm."""
    rows = []
    for (sparsity, arm), cell in runs.groupby(["sparsity", "arm"], sort=False):
        row: dict[str, Any] = {"sparsity": sparsity, "arm": arm, "seeds": len(cell)}
        for metric in METRICS:
            mean, half = mean_and_half_width(cell[metric].tolist())
            row[metric], row[f"{metric}_ci"] = mean, half
        rows.append(row)
    return rows


def compare(runs: pd.DataFrame) -> list[dict[str, Any]]:
    """One ``paper_vs_ours`` row per claim and sparsity: the paired seed-level difference and its verdict."""
    rows = []
    for sparsity in runs.sparsity.unique():
        cell = runs[runs.sparsity == sparsity]
        table = cell.pivot(index="seed", columns="arm")
        for claim, arm, other, metric, lower, paper in CLAIMS:
            if arm not in cell.arm.values or other not in cell.arm.values:
                continue
            diff = (table[metric][arm] - table[metric][other]).tolist()
            mean, half = mean_and_half_width(diff)
            better = (mean + half < 0) if lower else (mean - half > 0)
            worse = (mean - half > 0) if lower else (mean + half < 0)
            rows.append(
                {
                    "claim": claim,
                    "sparsity": float(sparsity),
                    "paper": paper,
                    "ours": f"{table[metric][arm].mean():.4g} vs {table[metric][other].mean():.4g} "
                    f"(diff {mean:+.3g} ± {half:.2g}, {len(diff)} seeds)",
                    "verdict": "reproduced"
                    if better
                    else ("reversed" if worse else "no measured difference"),
                }
            )
    return rows


def error_plot(summary: list[dict[str, Any]]) -> Figure:
    """Image error vs sparsity per arm, with the seed-level 95 % interval."""
    frame = pd.DataFrame(summary)
    fig, ax = plt.subplots(figsize=(5, 3.5))
    for arm, cell in frame.groupby("arm", sort=False):
        ax.errorbar(
            cell.sparsity, cell.image_mse, yerr=cell.image_mse_ci.fillna(0), marker="o", label=arm, capsize=3
        )
    ax.set(xlabel="sparsity", ylabel="same-noise image MSE vs dense", yscale="log")
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def study(
    ctx: TaskContext,
    *,
    seeds: list[int],
    sparsities: list[float],
    arms: dict[str, dict[str, Any]],
    n_calibration: int = 32,
    steps: int = 20,
    guidance: float = 2.0,
    eval_samples: int = 128,
    nm: str | None = None,
    dit: dict[str, Any] | None = None,
) -> TaskOutput:
    """Every arm at every sparsity and calibration seed; the summary, paired claims and plots."""
    if not seeds or not sparsities or not arms:
        raise ConfigError("the obsdiff study needs seeds, sparsities and arms")
    runs, extra = run_arms(
        ctx, arms, seeds, sparsities, n_calibration, steps, guidance, eval_samples, dit, nm
    )
    summary = summarise(runs)
    dense = extra["dense_metrics"]
    metrics = {f"dense/{k}": dense[k] for k in ("class_acc", "class_agree", "kid")}
    for row in summary:
        for metric in ("image_mse", "class_acc", "class_agree", "kid"):
            metrics[f"{row['arm']}@{row['sparsity']:g}/{metric}"] = row[metric]
    return {
        "metrics": metrics,
        "tables": {"paper_vs_ours": compare(runs), "summary": summary, "runs": runs.to_dict("records")},
        "figures": {"image_error": error_plot(summary), "samples": sample_grid(extra["grids"])},
    }
