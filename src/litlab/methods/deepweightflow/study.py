"""The study behind the README: over several seeds (a new zoo, flow init and samples per seed), the flow on
re-based weights against its ablations (raw weights, i.e. no canonicalisation), the DDPM peer and the
critique's trivial generators, with seed-level 95% intervals and the paper-vs-ours verdicts."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import matplotlib.pyplot as plt
import pandas as pd
import torch
from matplotlib.figure import Figure

from litlab.core.errors import ConfigError
from litlab.core.progress import track
from litlab.core.results import TaskOutput
from litlab.core.stats import mean_and_half_width
from litlab.datamodules.weights import Zoo, classification_data
from litlab.methods.deepweightflow.architectures import zoo_accuracy
from litlab.methods.deepweightflow.canonical import align_zoo
from litlab.methods.deepweightflow.evaluation import evaluate_generated
from litlab.methods.deepweightflow.training import fit_generator
from litlab.methods.deepweightflow.zoo import cached_zoo
from litlab.task import TaskContext

log = logging.getLogger("litlab")
METRICS = ("acc_mean", "acc_std", "acc_min", "nn_dist_mean", "seg_dist_mean", "error_iou_nn", "ensemble_100")
ARM_KEYS = ("kind", "align", "claim", "paper")  # the rest of an arm are generator options
ZOO_SEED_STRIDE = 1000  # seed s trains networks with seeds 1000·s, 1000·s + 1, ...


def interval(values: Sequence[float]) -> tuple[float, float]:
    """Mean and the half-width of its two-sided 95% t-interval over seeds (0 for one seed)."""
    mean, half = mean_and_half_width(values)
    return mean, (0.0 if len(values) < 2 else half)


def run_seed(
    ctx: TaskContext, seed: int, arms: Mapping[str, Mapping[str, Any]], zoo_cfg: Mapping[str, Any], cfg: dict
) -> tuple[pd.DataFrame, list[dict[str, Any]]]:
    """One seed: a zoo, one generator per arm, the evaluation table (one row per set) and the accuracy of
    the first arm under each sampler in ``cfg["solvers"]``."""
    zoo = cached_zoo(**zoo_cfg, seed=ZOO_SEED_STRIDE * seed, fitter=ctx.fitter)
    aligned = align_zoo(zoo)
    data = classification_data(zoo.dataset)

    def accuracy_of(params: dict[str, torch.Tensor]) -> torch.Tensor:
        return zoo_accuracy(zoo.arch, params, data.x_test, data.y_test)

    generated: dict[str, Zoo] = {}
    solver_rows: list[dict[str, Any]] = []
    for index, (name, arm) in enumerate(arms.items()):
        options = {k: v for k, v in arm.items() if k not in ARM_KEYS}
        source = aligned if arm.get("align", True) else zoo
        module = fit_generator(
            arm["kind"], source, cfg["n_train"], cfg["steps"], cfg["hidden"], seed, ctx.fitter, **options
        )
        if arm["kind"] == "flow":
            module.hparams.steps = cfg["sample_points"]
        params = module.generate(cfg["n_generate"], seed)
        generated[name] = Zoo(
            params, zoo.arch, zoo.dataset, list(range(cfg["n_generate"])), accuracy_of(params)
        )
        if index == 0 and arm["kind"] == "flow":
            samplers = [(module.hparams.solver, module.hparams.steps), *cfg["solvers"]]
            for solver, points in samplers:
                module.hparams.solver, module.hparams.steps = solver, points
                accuracy = accuracy_of(module.generate(cfg["n_generate"], seed))
                solver_rows.append(
                    {"seed": seed, "solver": f"{solver}-{points}", "acc_mean": float(accuracy.mean())}
                )
    frame, _ = evaluate_generated(aligned, generated, cfg["n_train"], seed)
    frame.insert(0, "seed", seed)
    frame["zoo_acc_mean"] = float(zoo.accuracy[: cfg["n_train"]].mean())
    return frame, solver_rows


def summarise(per_seed: pd.DataFrame) -> pd.DataFrame:
    """Per set: the mean over seeds of each metric and its 95% half-width (``<metric>_ci``)."""
    rows = []
    for name, group in per_seed.groupby("set", sort=False):
        row: dict[str, Any] = {"set": name, "seeds": len(group)}
        for metric in (*METRICS, "knob"):
            if metric in group and group[metric].notna().all():
                row[metric], row[f"{metric}_ci"] = interval(group[metric].tolist())
        rows.append(row)
    return pd.DataFrame(rows)


def paired(per_seed: pd.DataFrame, a: str, b: str | None, metric: str) -> list[float]:
    """Per-seed ``metric`` of set ``a`` minus that of set ``b``; with ``b=None``, ``a``'s ``metric`` divided
    by the zoo's mean accuracy."""
    wide = per_seed.pivot(index="seed", columns="set", values=metric)
    if b is None:
        return (wide[a] / per_seed.groupby("seed")["zoo_acc_mean"].first()).tolist()
    return (wide[a] - wide[b]).tolist()


@dataclass(frozen=True)
class Claim:
    """One row of paper_vs_ours: ``metric`` of set ``a`` minus set ``b`` (``b=None``: ``a`` over the zoo's
    accuracy) per seed; "reproduced" when the whole 95% interval is above ``above``, "not reproduced" when
    it is below, "no measured difference" (or "undecided" for a nonzero ``above``) otherwise."""

    claim: str
    paper: str
    a: str
    b: str | None
    metric: str
    above: float = 0.0

    def row(self, per_seed: pd.DataFrame) -> dict[str, Any]:
        mean, ci = interval(paired(per_seed, self.a, self.b, self.metric))
        low, high = mean - ci, mean + ci
        middle = (
            "no measured difference" if self.above == 0 else f"undecided (interval contains {self.above})"
        )
        verdict = "reproduced" if low > self.above else "not reproduced" if high < self.above else middle
        measure = f"{self.metric} {self.a} / zoo" if self.b is None else f"{self.metric} {self.a} - {self.b}"
        return {"claim": self.claim, "paper": self.paper, "measure": measure, "ours": mean, "ci95": ci,
                "threshold": self.above, "seeds": per_seed["seed"].nunique(), "verdict": verdict}  # fmt: skip


def claims(method: str, arms: Mapping[str, Mapping[str, Any]]) -> list[Claim]:
    """The paper's and the critique's claims for the method's set, then one row per other arm (its
    ``claim`` and ``paper`` keys): the method's accuracy (mean, and the worst network) minus the arm's."""
    rows = [
        Claim("zoo-level accuracy without fine-tuning (within 2% of the zoo)", "yes (tables not available)",
              method, None, "acc_mean", above=0.98),
        Claim("as accurate as new networks of the zoo", "yes (tables not available)",
              method, "heldout_real", "acc_mean"),
        Claim("better than copying the nearest training network", "(Zeng et al. critique)",
              method, "nearest_copy", "acc_mean"),
        Claim("more novel than noise-added training networks of equal accuracy", "(Zeng et al. critique)",
              method, "noise_added", "nn_dist_mean"),
        Claim("not interpolations: farther from every training pair's segment than equal-accuracy noise",
              "(Zeng et al. critique)", method, "noise_added", "seg_dist_mean"),
        Claim("more novel than interpolations of equal accuracy", "(Zeng et al. critique)",
              method, "interpolation_matched", "nn_dist_mean"),
        Claim("as far from the training networks as new real networks", "(Zeng et al. critique)",
              method, "heldout_real", "nn_dist_mean"),
    ]  # fmt: skip
    for name, arm in arms.items():
        if name != method:
            claim, paper = arm.get("claim", f"{method} beats {name}"), arm.get("paper", "-")
            rows.append(Claim(f"{claim} (accuracy)", paper, method, name, "acc_mean"))
            rows.append(Claim(f"{claim} (worst network)", "-", method, name, "acc_min"))
    return rows


def novelty_figure(summary: pd.DataFrame, floor: float = 0.5) -> Figure:
    """Accuracy against distance to the nearest training network, mean ± 95% interval over seeds, for the
    sets above ``floor`` accuracy (the others are named in the title)."""
    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    shown = summary[summary["acc_mean"] >= floor]
    for _, r in shown.iterrows():
        ax.errorbar(r["nn_dist_mean"], r["acc_mean"], r["acc_mean_ci"], r["nn_dist_mean_ci"], fmt="o",
                    capsize=2, label=str(r["set"]))  # fmt: skip
    hidden = [f"{r['set']} ({r['acc_mean']:.2f})" for _, r in summary[summary["acc_mean"] < floor].iterrows()]
    if hidden:
        ax.set_title(f"not shown, accuracy < {floor}: {', '.join(hidden)}", fontsize=8)
    ax.set_xlabel("mean L2 to the nearest training network (aligned)")
    ax.set_ylabel("mean test accuracy")
    ax.legend(fontsize=7, loc="lower right")
    return fig


def study(
    ctx: TaskContext,
    *,
    seeds: list[int],
    arms: dict[str, dict[str, Any]],
    arch: str | dict = "mlp_64_32_10",
    dataset: str = "digits",
    n_networks: int = 200,
    n_train: int = 100,
    zoo_epochs: int = 20,
    zoo_batch_size: int = 128,
    zoo_lr: float = 1e-2,
    steps: int = 3000,
    hidden: int = 256,
    n_generate: int = 100,
    sample_points: int = 100,
    solvers: list[list[Any]] | None = None,
) -> TaskOutput:
    """DeepWeightFlow's claims over ``seeds``: per seed a zoo of ``n_networks`` (the first ``n_train`` train
    the generators), one generator per arm (``{name: {kind: flow|ddpm, align: bool, claim: str, paper: str,
    **generator options}}``; the first arm is the method, each other arm an ablation or a peer compared
    with it in paper_vs_ours), the critique's baselines matched to the method, and ``solvers``
    ([[euler, 20], ...]) on the method."""
    if not seeds or not arms:
        raise ConfigError("task.seeds and task.arms must not be empty")
    if any(arm.get("kind") not in ("flow", "ddpm") for arm in arms.values()):
        raise ConfigError(f"every arm needs kind: flow or ddpm; got {dict(arms)}")
    zoo_cfg = {"arch": arch, "dataset": dataset, "n_networks": n_networks, "epochs": zoo_epochs,
               "batch_size": zoo_batch_size, "lr": zoo_lr}  # fmt: skip
    cfg = {"n_train": n_train, "steps": steps, "hidden": hidden, "n_generate": n_generate,
           "sample_points": sample_points, "solvers": solvers or []}  # fmt: skip
    frames, solver_rows = [], []
    for seed in track(seeds, "deepweightflow study (seeds)"):
        frame, rows = run_seed(ctx, seed, arms, zoo_cfg, cfg)
        frames.append(frame.reset_index())
        solver_rows += rows
        log.info("seed %d:\n%s", seed, frame.to_string(float_format=lambda v: f"{v:.4f}"))
    per_seed = pd.concat(frames, ignore_index=True)
    summary = summarise(per_seed)
    method = next(iter(arms))
    verdicts = [claim.row(per_seed) for claim in claims(method, arms)]
    tables: dict[str, Any] = {"paper_vs_ours": verdicts, "summary": summary, "per_seed": per_seed}
    if solver_rows:
        solver_frame = pd.DataFrame(solver_rows)
        tables["solvers"] = [
            {
                "solver": name,
                "acc_mean": interval(g["acc_mean"])[0],
                "acc_mean_ci": interval(g["acc_mean"])[1],
            }
            for name, g in solver_frame.groupby("solver", sort=False)
        ]
    metrics = {
        f"{r['set']}/{k}": float(v) for r in summary.to_dict("records") for k, v in r.items() if k != "set"
    }
    metrics |= {f"claim/{r['measure']}": r["ours"] for r in verdicts}
    return {"metrics": metrics, "tables": tables, "figures": {"novelty": novelty_figure(summary)}}
