"""The symmetric-space study: does CartanFM learn the known structure of S² = SO(3)/SO(2), and does it help?

Every arm of :data:`litlab.methods.symspace.synthetic.ARMS` is trained once per seed on the same data (seeds
vary initialisation and batches), then scored on structure (Cartan residuals of the learnt bases), the
geodesic mirror (−X of observed latents decoded and read back: does it land on the held-out factors?) and
held-out reconstruction error. Arms are compared with the full method seed by seed (paired difference,
95 % Student-t interval); ``paper_vs_ours`` states each claim and what the intervals say.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import Any

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.figure import Figure

from litlab.core.errors import ConfigError
from litlab.core.progress import track
from litlab.core.results import TaskOutput
from litlab.core.stats import mean_and_half_width
from litlab.datamodules.symmetric_space import symmetric_space_data
from litlab.methods.symspace.synthetic import ARMS, run_arm
from litlab.task import TaskContext

REFERENCE = "cartanfm"
SUMMARY_METRICS = (
    "cartan_residual_max",
    "commutator_ratio_pp",
    "span_overlap",
    "heldout_k_share",
    "mirror_in_heldout",
    "mirror_factor_error",
    "mirror_mse",
    "heldout_mse",
    "id_mse",
)
# (claim, paper's statement, metric, the arms it is put against, lower is better)
CLAIMS: tuple[tuple[str, str, str, tuple[str, ...], bool], ...] = (
    (
        "L_Cartan makes the learnt bases a Cartan pair",
        "learns a Cartan decomposition of a learnable Lie algebra (synthetic analysis, figures)",
        "cartan_residual_max",
        ("cartanfm_orthogonality", "no_cartan", "fm_only"),
        True,
    ),
    (
        "GSC sends the mirror −X of observed latents to the held-out factors",
        "geodesic symmetry extends the structure to unseen combinations",
        "mirror_in_heldout",
        ("cartanfm_code_sign", "no_gsc", "fm_only", "vae"),
        False,
    ),
    (
        "the symmetric-space terms lower held-out error",
        "CartanFM beats FM-only and the VAE on held-out combinations (dSprites table)",
        "heldout_mse",
        ("no_cartan", "no_gsc", "cartanfm_code_sign", "fm_only", "vae"),
        True,
    ),
)


def summarise(runs: pd.DataFrame) -> list[dict[str, Any]]:
    """Mean ± 95 % half-width of every summary metric per arm (NaN where the arm has no such metric)."""
    rows = []
    for arm, group in runs.groupby("arm", sort=False):
        row: dict[str, Any] = {"arm": arm, "seeds": len(group)}
        for metric in SUMMARY_METRICS:
            values = group[metric].dropna().tolist() if metric in group else []
            mean, half = mean_and_half_width(values) if values else (math.nan, math.nan)
            row[metric], row[f"{metric}_hw"] = mean, half
        rows.append(row)
    return rows


def paired(runs: pd.DataFrame, arm: str, metric: str) -> tuple[float, float, float]:
    """(mean of arm − reference over shared seeds, 95 % half-width, sd of the difference)."""
    table = runs.pivot(index="seed", columns="arm", values=metric)[[arm, REFERENCE]].dropna()
    diff = (table[arm] - table[REFERENCE]).tolist()
    mean, half = mean_and_half_width(diff)
    return mean, half, statistics.stdev(diff) if len(diff) > 1 else math.nan


def verdict(mean: float, half: float, lower_better: bool) -> str:
    """Whether the reference arm is better than the other (interval of other − reference excludes 0)."""
    if math.isnan(half):
        return "one seed: no interval"
    better = mean - half > 0 if lower_better else mean + half < 0
    worse = mean + half < 0 if lower_better else mean - half > 0
    return "CartanFM better" if better else "CartanFM worse" if worse else "no significant difference"


def paper_vs_ours(runs: pd.DataFrame) -> list[dict[str, Any]]:
    """One row per (claim, comparison arm): the full method's mean, the other arm's, the paired difference."""
    rows = []
    means = runs.groupby("arm")
    for claim, paper, metric, others, lower_better in CLAIMS:
        ours = means[metric].mean()
        for arm in others:
            if arm not in ours or math.isnan(ours[arm]):
                continue
            diff, half, _ = paired(runs, arm, metric)
            rows.append(
                {
                    "claim": claim,
                    "paper": paper,
                    "metric": metric,
                    "cartanfm": round(float(ours[REFERENCE]), 4),
                    "versus": arm,
                    "versus_value": round(float(ours[arm]), 4),
                    "difference (versus − cartanfm)": f"{diff:+.4f} ± {half:.4f}",
                    "verdict": verdict(diff, half, lower_better),
                }
            )
    return rows


def summary_figure(summary: list[dict[str, Any]]) -> Figure:
    """Per arm: max Cartan residual, share of mirrors on held-out factors, held-out MSE (95 % intervals)."""
    metrics = ("cartan_residual_max", "mirror_in_heldout", "heldout_mse")
    fig, axes = plt.subplots(1, len(metrics), figsize=(4.2 * len(metrics), 3.4))
    arms = [row["arm"] for row in summary]
    for ax, metric in zip(axes, metrics, strict=True):
        values = [row[metric] for row in summary]
        errors = [0.0 if math.isnan(row[f"{metric}_hw"]) else row[f"{metric}_hw"] for row in summary]
        ax.bar(range(len(arms)), values, yerr=errors, color="tab:blue", capsize=3)
        ax.set_xticks(range(len(arms)), arms, rotation=60, ha="right", fontsize=7)
        ax.set_title(metric, fontsize=9)
    fig.tight_layout()
    return fig


def symspace_study(
    ctx: TaskContext,
    *,
    seeds: Sequence[int],
    arms: Sequence[str] = tuple(ARMS),
    steps: int = 2000,
    lr: float = 3e-3,
    hidden: int = 128,
    algebra: Sequence[int] = (1, 2, 3),
    data: dict[str, Any] | None = None,
) -> TaskOutput:
    """Train every arm for every seed on the sphere problem; tables of runs, summary and paper_vs_ours."""
    unknown = sorted(set(arms) - set(ARMS))
    if unknown or REFERENCE not in arms:
        raise ConfigError(f"arms must include {REFERENCE!r} and come from {sorted(ARMS)}; unknown: {unknown}")
    problem = symmetric_space_data(**(data or {}))
    jobs = [(seed, arm) for seed in seeds for arm in arms]
    rows = []
    for seed, arm in track(jobs, description="symspace study"):
        metrics = run_arm(
            arm,
            problem,
            seed=seed,
            steps=steps,
            lr=lr,
            hidden=hidden,
            algebra=tuple(int(a) for a in algebra),
            fitter=ctx.fitter,
        )
        rows.append({"arm": arm, "seed": seed, **metrics})
    runs = pd.DataFrame(rows)
    summary = summarise(runs)
    metrics = {
        f"{row['arm']}/{metric}": row[metric]
        for row in summary
        for metric in SUMMARY_METRICS
        if not math.isnan(row[metric])
    }
    return {
        "metrics": metrics,
        "tables": {"paper_vs_ours": paper_vs_ours(runs), "summary": summary, "runs": runs},
        "figures": {"summary": summary_figure(summary)},
    }
