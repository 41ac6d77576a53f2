"""Turn a multirun of KAN fits into the paper's win-rate table: each scheme against the baseline."""

from __future__ import annotations

import logging
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import yaml
from matplotlib.figure import Figure

from litlab.core.errors import LitlabError
from litlab.core.results import TaskOutput, read_results
from litlab.methods.kan.init import InitScheme
from litlab.task import TaskContext

log = logging.getLogger(__name__)

ARCHITECTURE = ["function", "width", "depth", "grid_size"]


def collect_runs(sweep_dir: Path, metric: str = "test/rel_l2") -> pd.DataFrame:
    """One row per finished job under ``sweep_dir``: its architecture, scheme, seed and ``metric``."""
    rows = []
    for result_file in sorted(Path(sweep_dir).rglob("results.json")):
        config_file = result_file.parent / "config_resolved.yaml"
        if not config_file.exists():
            continue
        cfg = yaml.safe_load(config_file.read_text())
        metrics = read_results(result_file.parent)["metrics"]
        if metric not in metrics:
            continue
        net, init = cfg["model"]["net"], cfg["model"]["net"]["init"]
        scheme = InitScheme.from_config(init).label
        rows.append(
            {
                "function": cfg["data"]["function"],
                "width": net["width"],
                "depth": net["depth"],
                "grid_size": net["grid_size"],
                "scheme": scheme,
                "seed": cfg["seed"],
                metric: metrics[metric],
            }
        )
    if not rows:
        raise LitlabError(f"no finished runs with {metric} under {sweep_dir}; run the sweep first")
    return pd.DataFrame(rows)


def win_rates(runs: pd.DataFrame, metric: str = "test/rel_l2", baseline: str = "baseline") -> pd.DataFrame:
    """Per scheme: share of architectures where its median-over-seeds metric beats the baseline's.

    Also reports the median log10 ratio to the baseline (negative = better), overall and split into
    small (width <= 4) and wide (width >= 32) models, as in the paper's recount.
    """
    medians = runs.groupby([*ARCHITECTURE, "scheme"])[metric].median().unstack("scheme")
    if baseline not in medians:
        raise LitlabError(f"the sweep has no {baseline!r} runs to compare against")
    rows = []
    for scheme in [c for c in medians.columns if c != baseline]:
        pair = medians[[scheme, baseline]].dropna()
        log_ratio = np.log10(pair[scheme] / pair[baseline])
        row = {"scheme": scheme, "architectures": len(pair), "win_rate": float((log_ratio < 0).mean())}
        row["median_log10_ratio"] = float(log_ratio.median())
        for label, mask in (
            ("small", pair.index.get_level_values("width") <= 4),
            ("wide", pair.index.get_level_values("width") >= 32),
        ):
            if mask.any():
                row[f"win_rate_{label}"] = float((log_ratio[mask] < 0).mean())
                row[f"median_log10_ratio_{label}"] = float(log_ratio[mask].median())
        rows.append(row)
    return pd.DataFrame(rows).set_index("scheme")


def kan_init_report(ctx: TaskContext, sweep_dir: str, metric: str = "test/rel_l2") -> TaskOutput:
    """The ``runs`` and ``win_rates`` tables and ``win_scatter`` plot of a sweep; each scheme's win rate."""
    runs = collect_runs(Path(sweep_dir), metric)
    table = win_rates(runs, metric)
    log.info("win rates against the baseline (%d runs):\n%s", len(runs), table.to_string())
    return {
        "metrics": {f"{scheme}/win_rate": float(row.win_rate) for scheme, row in table.iterrows()},
        "tables": {"runs": runs, "win_rates": table.reset_index()},
        "figures": {"win_scatter": _scatter(runs, metric)},
    }


def _scatter(runs: pd.DataFrame, metric: str) -> Figure:
    medians = runs.groupby([*ARCHITECTURE, "scheme"])[metric].median().unstack("scheme")
    fig, ax = plt.subplots(figsize=(5.5, 5))
    for scheme in [c for c in medians.columns if c != "baseline"]:
        pair = medians[[scheme, "baseline"]].dropna()
        ax.loglog(pair["baseline"], pair[scheme], "o", alpha=0.8, label=scheme)
    low, high = np.nanmin(medians.values), np.nanmax(medians.values)
    ax.plot([low, high], [low, high], "k--", lw=1)
    ax.set(xlabel=f"baseline {metric}", ylabel=f"scheme {metric}", title="below the diagonal = scheme wins")
    ax.legend()
    return fig
