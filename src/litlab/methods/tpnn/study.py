"""Bayesian-TPNN tasks: one chain on one data set (``fit``), and the study against ANOVA-T^2PNN, BART,
EBM and XGBoost with the sampler's ablations (``study``)."""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from importlib.util import find_spec
from typing import Any

import matplotlib.pyplot as plt
import pandas as pd
import torch
from matplotlib.figure import Figure

from litlab.core.progress import track
from litlab.core.results import TaskOutput
from litlab.datamodules.tabular import SYNTHETIC, TabularDataModule, TabularSplits, load_tabular
from litlab.methods.tpnn import baselines
from litlab.methods.tpnn.estimator import BayesianTPNN, TPNNConfig
from litlab.methods.tpnn.module import ANOVATPNNRegressor
from litlab.methods.tpnn.scores import predictive_scores, selection_auroc
from litlab.task import TaskContext

log = logging.getLogger("litlab")

# Ablations of the sampler: config overrides of the full method (and p_input = uniform).
ABLATIONS: dict[str, dict[str, Any]] = {
    "no_birth_death": {"birth_death": False},
    "no_stepwise": {"stepwise": False},
    "uniform_p_input": {},
}
# The paper's numbers (Park et al. 2025, from the notes); Boston is replaced by diabetes here.
PAPER = [
    ("RMSE (Boston; ours: diabetes)", "rmse", "diabetes", {"tpnn": 3.654, "anova2": 3.671, "bart": 4.073}),
    ("CRPS (Boston; ours: diabetes)", "crps", "diabetes", {"tpnn": 2.202, "bart": 2.623}),
    ("3rd-order selection AUROC (p=50; ours: planted3, p=10)", "auroc3", "planted3", {"tpnn": 0.985}),
    ("1st-order selection AUROC (p=50; ours: planted3, p=10)", "auroc1", "planted3", {"tpnn": 1.0}),
]


def selection_scores(
    norms: Mapping[tuple[int, ...], float], splits: TabularSplits, p: int
) -> dict[str, float]:
    """Component-selection AUROC per order (1..3) of a synthetic set's true components."""
    if not splits.components:
        return {}
    return {f"auroc{d}": selection_auroc(dict(norms), splits.components, p, d) for d in (1, 2, 3)}


def run_bayesian(
    splits: TabularSplits, config: TPNNConfig, seed: int, importance: str
) -> tuple[BayesianTPNN, dict[str, float]]:
    """Fit Bayesian-TPNN; predictive scores on the test split, selection AUROC, mean K, seconds."""
    weights = baselines.input_importance(splits.x_train, splits.y_train, importance, seed=seed)
    model = BayesianTPNN(config, seed=seed).fit(splits.x_train, splits.y_train, weights)
    mean, sigma = model.predict_draws(splits.x_test)
    norms = {c.variables: c.norm for c in model.components()}
    burned = model.trace.n_nodes[config.burn_in :]
    metrics = {
        **predictive_scores(mean, sigma, splits.y_test),
        **selection_scores(norms, splits, splits.x_train.shape[1]),
        "nodes": sum(burned) / len(burned),
        "seconds": model.trace.seconds,
    }
    return model, metrics


def run_anova(
    ctx: TaskContext,
    data: Mapping[str, Any],
    seed: int,
    order: int = 2,
    n_basis: int = 10,
    max_epochs: int = 1500,
) -> tuple[ANOVATPNNRegressor, dict[str, float]]:
    """Train ANOVA-TPNN of ``order`` through ``ctx.fitter`` (early stopping on validation RMSE); test scores
    with a plug-in Gaussian predictive (sd = validation RMSE) for calibration."""
    datamodule = TabularDataModule(**data, seed=seed)
    module = ANOVATPNNRegressor(order=order, n_basis=n_basis, init_seed=seed)
    module.bind_data(datamodule.data_spec())
    result = ctx.fitter.fit(
        module,
        datamodule,
        max_epochs=max_epochs,
        val_every_n_steps=min(10, max_epochs),  # full batch: one step per epoch
        monitor="val/rmse",
        patience=20,
        restore_best=True,
        seed=seed,
    )
    splits, scaling = datamodule.load(), datamodule.scaling
    module.eval()
    with torch.no_grad():
        prediction = module(scaling.x(splits.x_test).float()).double() * scaling.y_std + scaling.y_mean
    sigma = torch.tensor([result.metrics["val/rmse"]], dtype=torch.float64)
    norms = module.component_norms(scaling.x(splits.x_train).float())
    metrics = {
        **predictive_scores(prediction[None], sigma, splits.y_test),
        **selection_scores(norms, splits, splits.x_train.shape[1]),
        "seconds": result.seconds,
        "epochs": float(result.epochs),
    }
    return module, metrics


def run_peers(splits: TabularSplits, seed: int, bart: Mapping[str, int]) -> dict[str, dict[str, float]]:
    """BART, EBM and XGBoost where their packages are installed (``litlab[tpnn]``)."""
    out = {}
    if find_spec("pymc_bart") is not None:
        draws = baselines.fit_bart(splits.x_train, splits.y_train, splits.x_test, seed=seed, **bart)
        out["bart"] = {**predictive_scores(draws.mean, draws.sigma, splits.y_test), "seconds": draws.seconds}
    if find_spec("interpret") is not None:
        fit = baselines.fit_ebm(splits.x_train, splits.y_train, splits.x_test, seed=seed)
        rmse = float((fit.prediction - splits.y_test).square().mean().sqrt())
        norms = selection_scores(fit.terms, splits, splits.x_train.shape[1])
        out["ebm"] = {"rmse": rmse, **norms, "seconds": fit.seconds}
    if find_spec("xgboost") is not None:
        fit = baselines.fit_xgboost(splits.x_train, splits.y_train, splits.x_test, seed=seed)
        out["xgboost"] = {
            "rmse": float((fit.prediction - splits.y_test).square().mean().sqrt()),
            "seconds": fit.seconds,
        }
    return out


def fit(
    ctx: TaskContext,
    data: Mapping[str, Any],
    model: Mapping[str, Any] | None = None,
    importance: str = "gbm",
    seed: int = 0,
) -> TaskOutput:
    """One Bayesian-TPNN chain on one data set: test scores, the component table and trace plots."""
    splits = load_tabular(**data, seed=seed)
    config = TPNNConfig(**(model or {}))
    estimator, metrics = run_bayesian(splits, config, seed, importance)
    names = splits.feature_names
    truth = {tuple(c) for c in splits.components}
    table = [
        {
            "component": " x ".join(names[j] for j in c.variables),
            "order": len(c.variables),
            "norm": c.norm,
            "inclusion": c.inclusion,
            **({"true": c.variables in truth} if truth else {}),
        }
        for c in estimator.components()
    ]
    figures = {"components": components_figure(table[:15]), "trace": trace_figure(estimator, config.burn_in)}
    return {"metrics": metrics, "tables": {"components": table}, "figures": figures}


def components_figure(rows: Sequence[Mapping[str, Any]]) -> Figure:
    """Posterior mean ||f_S|| of the largest components (true ones in a darker colour when known)."""
    fig, ax = plt.subplots(figsize=(6, 0.3 * len(rows) + 1.2))
    colours = ["tab:blue" if row.get("true", True) else "tab:gray" for row in rows][::-1]
    ax.barh([row["component"] for row in rows][::-1], [row["norm"] for row in rows][::-1], color=colours)
    ax.set_xlabel("posterior mean ||f_S||_2,n")
    ax.set_title("Bayesian-TPNN components (grey: not in the true function)")
    fig.tight_layout()
    return fig


def trace_figure(estimator: BayesianTPNN, burn_in: int) -> Figure:
    """Node count and noise sd along the chain."""
    fig, axes = plt.subplots(1, 2, figsize=(9, 3))
    axes[0].plot(estimator.trace.n_nodes)
    axes[0].set(xlabel="iteration", ylabel="K (nodes)")
    axes[1].plot([math.sqrt(v) for v in estimator.trace.sigma2])
    axes[1].set(xlabel="iteration", ylabel="sigma")
    for ax in axes:
        ax.axvline(burn_in, color="k", lw=0.8, ls="--")
    fig.tight_layout()
    return fig


def study(
    ctx: TaskContext,
    seeds: Sequence[int] = (0, 1, 2, 3, 4),
    sets: Sequence[str] = ("planted3", "diabetes"),
    ablation_set: str = "planted3",
    peer_sets: Sequence[str] = ("planted3", "diabetes"),
    n_samples: int = 1000,
    n_features: int = 10,
    model: Mapping[str, Any] | None = None,
    importance: str = "gbm",
    anova_epochs: int = 300,
    bart: Mapping[str, int] | None = None,
) -> TaskOutput:
    """Every method on every set and seed (BART, EBM, XGBoost on ``peer_sets`` only, for time); the
    sampler's ablations on ``ablation_set``.

    Returns the per-run table, mean/sd summaries per set and method, the ablation table and the
    paper-vs-ours table.
    """
    base = TPNNConfig(**(model or {}))
    bart = dict(bart or {"trees": 50, "draws": 500, "tune": 500})
    rows, figures = [], {}
    jobs = [(name, seed) for name in sets for seed in seeds]
    for name, seed in track(jobs, description="tpnn study"):
        data = {"name": name, "n_samples": n_samples, "n_features": n_features}
        splits = load_tabular(**data, seed=seed)
        arms = {"tpnn": (base, importance)}
        if name == ablation_set:
            for arm, overrides in ABLATIONS.items():
                arms[arm] = (
                    replace(base, **overrides),
                    "uniform" if arm == "uniform_p_input" else importance,
                )
        for arm, (config, weights) in arms.items():
            estimator, metrics = run_bayesian(splits, config, seed, weights)
            rows.append({"set": name, "seed": seed, "method": arm, **metrics})
            if arm == "tpnn" and seed == seeds[0] and name in SYNTHETIC:
                names = splits.feature_names
                truth = set(splits.components)
                bars = [
                    {
                        "component": " x ".join(names[j] for j in c.variables),
                        "norm": c.norm,
                        "true": c.variables in truth,
                    }
                    for c in estimator.components()[:15]
                ]
                figures[f"components_{name}"] = components_figure(bars)
        _, metrics = run_anova(ctx, data, seed, max_epochs=anova_epochs)
        rows.append({"set": name, "seed": seed, "method": "anova2", **metrics})
        for arm, metrics in (run_peers(splits, seed, bart) if name in peer_sets else {}).items():
            rows.append({"set": name, "seed": seed, "method": arm, **metrics})
        log.info("tpnn study: %s seed %d done", name, seed)
    frame = pd.DataFrame(rows)
    summary = summarise(frame)
    ablation = summary[summary.set == ablation_set]
    return {
        "metrics": headline(frame),
        "tables": {
            "runs": frame,
            "summary": summary,
            "ablations": ablation,
            "paper_vs_ours": paper_vs_ours(frame),
        },
        "figures": figures,
    }


def summarise(frame: pd.DataFrame) -> pd.DataFrame:
    """Mean and sd over seeds of every score, per set and method."""
    scores = [c for c in frame.columns if c not in ("set", "seed", "method")]
    grouped = frame.groupby(["set", "method"], sort=False)[scores]
    mean, sd = grouped.mean(), grouped.std()
    out = mean.copy()
    for column in scores:
        out[f"{column}_sd"] = sd[column]
    return out.reset_index()


def _mean(frame: pd.DataFrame, name: str, method: str, column: str) -> float:
    values = frame[(frame.set == name) & (frame.method == method)]
    return float(values[column].mean()) if column in values and len(values) else math.nan


def headline(frame: pd.DataFrame) -> dict[str, float]:
    """Mean test scores per set and method (``<set>/<method>/<score>``)."""
    out = {}
    for (name, method), group in frame.groupby(["set", "method"]):
        for column in ("rmse", "crps", "ece", "coverage", "auroc1", "auroc2", "auroc3"):
            if column in group and group[column].notna().any():
                out[f"{name}/{method}/{column}"] = float(group[column].mean())
    return out


def paper_vs_ours(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """The paper's headline numbers beside ours (mean over seeds), method by method."""
    rows = []
    for label, column, name, paper in PAPER:
        for method in ("tpnn", "anova2", "bart"):
            ours = _mean(frame, name, method, column)
            if method in paper or not math.isnan(ours):
                rows.append(
                    {"quantity": label, "method": method, "paper": paper.get(method, math.nan), "ours": ours}
                )
    return rows
