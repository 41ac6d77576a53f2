"""Tables and figures of simulated risks beside the bound (no simulation here, only what was simulated)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import matplotlib.pyplot as plt
from matplotlib.figure import Figure

from litlab.methods.quantsgd.bounds import Bound, quantized_bound
from litlab.methods.quantsgd.simulator import Problem, SimResult

Row = dict[str, Any]


def run_bound(problem: Problem, result: SimResult, i: int) -> Bound:
    """The bound of ``result``'s setting ``i`` at its checkpoints, with the sup norms that run measured."""
    return quantized_bound(
        problem,
        result.settings[i],
        result.moments[i],
        result.checkpoints,
        float(result.sup_norm_q[i]),
        float(result.sup_dev_q[i]),
    )


def curve_rows(
    result: SimResult,
    problem: Problem,
    labels: Sequence[dict[str, Any] | None],
    paired: Sequence[int | None] | None = None,
) -> list[Row]:
    """One row per (setting, N): seed mean and sd of both risks, the bound, and bound / simulated mean.

    ``labels[i]`` holds extra columns for setting i (None leaves it out). ``paired[i] = j`` adds the
    per-seed gaps risk_i − risk_j and risk_q_i − risk_q_j (mean and standard error): j ran on the same
    draws, so the gaps are paired.
    """
    rows = []
    n_seeds = len(result.seeds)
    for i, setting in enumerate(result.settings):
        if labels[i] is None:
            continue
        bound = run_bound(problem, result, i)
        for k, n in enumerate(result.checkpoints):
            risk, risk_q = result.risk[i, :, k], result.risk_q[i, :, k]
            row = {
                **labels[i],
                "setting": setting.name,
                "dim": setting.dim,
                "batch_size": setting.batch_size,
                "n_steps": n,
                "risk_mean": risk.mean().item(),
                "risk_sd": risk.std().item() if n_seeds > 1 else 0.0,
                "risk_q_mean": risk_q.mean().item(),
                "risk_q_sd": risk_q.std().item() if n_seeds > 1 else 0.0,
                "bound": bound.excess[k].item(),
                "bound_q": bound.excess_q[k].item(),
                "bound_ratio": bound.excess[k].item() / risk.mean().item(),
                "bound_q_ratio": bound.excess_q[k].item() / risk_q.mean().item(),
                "k_star": int(bound.k_star[k]),
                "bound_valid": bound.valid,
                "bound_note": bound.reason,
            }
            j = None if paired is None else paired[i]
            if j is not None:
                for key, gap in (
                    ("gap", risk - result.risk[j, :, k]),
                    ("gap_q", risk_q - result.risk_q[j, :, k]),
                ):
                    row[f"{key}_mean"] = gap.mean().item()
                    row[f"{key}_se"] = gap.std().item() / n_seeds**0.5 if n_seeds > 1 else 0.0
            rows.append(row)
    return rows


def bound_summary(rows: Sequence[Row]) -> dict[str, float]:
    """Over the rows where the bound claims to hold: how many, violations, and the tightest/loosest ratio."""
    valid = [r for r in rows if r["bound_valid"]]
    ratios = [min(r["bound_ratio"], r["bound_q_ratio"]) for r in valid]
    loose = [max(r["bound_ratio"], r["bound_q_ratio"]) for r in valid]
    return {
        "bound/points": float(len(valid)),
        "bound/violations": float(sum(ratio < 1 for ratio in ratios)),
        "bound/min_ratio": min(ratios) if ratios else float("nan"),
        "bound/max_ratio": max(loose) if loose else float("nan"),
    }


def _colors(n: int) -> list:
    """n distinguishable colours (tab10, then tab20)."""
    cmap = plt.get_cmap("tab10" if n <= 10 else "tab20")
    return [cmap(i % cmap.N) for i in range(n)]


def curves_figure(rows: Sequence[Row], title: str) -> Figure:
    """Risk of the averaged iterate against N per setting (solid), its bound (dashed): clean | quantized."""
    names = list(dict.fromkeys(r["setting"] for r in rows))
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharey=True)
    for color, name in zip(_colors(len(names)), names):
        own = [r for r in rows if r["setting"] == name]
        steps = [r["n_steps"] for r in own]
        for ax, key, bound in ((axes[0], "risk_mean", "bound"), (axes[1], "risk_q_mean", "bound_q")):
            ax.loglog(steps, [r[key] for r in own], "o-", color=color, ms=3, label=name)
            if own[0]["bound_valid"]:
                ax.loglog(steps, [r[bound] for r in own], "--", color=color, lw=0.9)
    axes[0].set_title("clean test risk ‖w̄ − w*‖²_H")
    axes[1].set_title("quantized-input test risk E(Q(x)ᵀw̄ − y)² − σ²")
    for ax in axes:
        ax.set_xlabel("SGD steps N")
        ax.grid(alpha=0.3, which="both")
    axes[0].set_ylabel("excess risk (mean over seeds); dashed: bound")
    axes[1].legend(fontsize=7)
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def dimension_figure(rows: Sequence[Row], title: str) -> Figure:
    """Risk at the largest N against d per quantizer kind (solid) with its bound (dashed)."""
    last = max(r["n_steps"] for r in rows)
    kinds = list(dict.fromkeys(r["kind"] for r in rows))
    fig, axes = plt.subplots(1, 2, figsize=(10, 4), sharey=True)
    for color, kind in zip(_colors(len(kinds)), kinds):
        own = sorted((r for r in rows if r["kind"] == kind and r["n_steps"] == last), key=lambda r: r["dim"])
        dims = [r["dim"] for r in own]
        for ax, key, bound in ((axes[0], "risk_mean", "bound"), (axes[1], "risk_q_mean", "bound_q")):
            ax.loglog(dims, [r[key] for r in own], "o-", color=color, label=kind)
            ax.loglog(dims, [r[bound] if r["bound_valid"] else float("nan") for r in own], "--", color=color)
    axes[0].set_title(f"clean risk at N = {last}")
    axes[1].set_title(f"quantized-input risk at N = {last}")
    for ax in axes:
        ax.set_xlabel("dimension d")
        ax.grid(alpha=0.3, which="both")
    axes[0].set_ylabel("excess risk; dashed: bound")
    axes[0].legend(fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def batch_figure(rows: Sequence[Row], title: str) -> Figure:
    """Risk increase over full precision against B per quantized target, with a 1/B reference."""
    targets = list(dict.fromkeys(r["target"] for r in rows))
    fig, ax = plt.subplots(figsize=(5.5, 4))
    for color, target in zip(_colors(len(targets)), targets):
        own = sorted((r for r in rows if r["target"] == target), key=lambda r: r["batch_size"])
        sizes = [r["batch_size"] for r in own]
        ax.errorbar(
            sizes,
            [r["delta_mean"] for r in own],
            yerr=[r["delta_se"] for r in own],
            fmt="o-",
            color=color,
            label=target,
            capsize=2,
        )
        first = own[0]
        ax.loglog(sizes, [first["delta_mean"] * sizes[0] / b for b in sizes], ":", color=color, lw=0.8)
        if "exact_delta" in first:
            ax.plot(sizes, [r["exact_delta"] for r in own], "x", color=color, ms=7)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("batch size B (fixed number of steps)")
    ax.set_ylabel("risk(quantized) − risk(full precision)")
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8, title="dotted: ∝ 1/B; x: exact recursion", title_fontsize=7)
    ax.grid(alpha=0.3, which="both")
    fig.tight_layout()
    return fig
