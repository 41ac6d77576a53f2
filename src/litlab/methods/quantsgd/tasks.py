"""The paper's experiments as tasks: Q1 (ε sweep), Q2 (d sweep), the batch-size effect and number formats.

Each runs the batched simulator (the paper's algorithm; see ``simulator.py``) on the device of the run's
``trainer=`` (``ctx.fitter``), and returns the simulated risks beside the reconstructed bound. Defaults are
the paper's setting: λ_i = i^-2, w* = 1, σ = 1, B = 1, constant γ = 0.05, N up to 2^14, 20 seeds.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch

from litlab.core.progress import track
from litlab.core.results import TaskOutput
from litlab.methods.quantsgd.bounds import quantized_bound
from litlab.methods.quantsgd.quantizers import Quantizer, fp_eps, int_eps
from litlab.methods.quantsgd.recursion import expected_risk
from litlab.methods.quantsgd.report import (
    batch_figure,
    bound_summary,
    curve_rows,
    curves_figure,
    dimension_figure,
)
from litlab.methods.quantsgd.simulator import Problem, Setting, simulate
from litlab.task import TaskContext

CHECKPOINTS = tuple(2**k for k in range(6, 15))
SEEDS = tuple(range(20))


def _device(ctx: TaskContext) -> torch.device:
    """Where the simulator runs: the device of the run's ``trainer=`` (cpu unless trainer=gpu)."""
    return ctx.fitter.fabric.device


def _problem(exponent: float, noise_std: float, w_star_value: float) -> Problem:
    return Problem(exponent=exponent, noise_std=noise_std, w_star_value=w_star_value)


def _at(rows: list[dict], n: int, **match: Any) -> dict:
    """The one row at N = n whose fields equal ``match``."""
    found = [r for r in rows if r["n_steps"] == n and all(r[k] == v for k, v in match.items())]
    if len(found) != 1:
        raise LookupError(f"expected one row for N={n}, {match}; found {len(found)}")
    return found[0]


def q1(
    ctx: TaskContext,
    *,
    seeds: Sequence[int] = SEEDS,
    dim: int = 200,
    step_size: float = 0.05,
    eps: Sequence[float] = (1e-3, 5e-3, 1e-2),
    kinds: Sequence[str] = ("additive", "multiplicative"),
    checkpoints: Sequence[int] = CHECKPOINTS,
    exact: bool = True,
    exponent: float = 2.0,
    noise_std: float = 1.0,
    w_star_value: float = 1.0,
) -> TaskOutput:
    """Q1: data quantization with ε ∈ {0} ∪ ``eps`` for each kind at d = ``dim``, B = 1; risk against N.

    With ``exact``, rows the recursion covers (full precision, additive) carry the exact expected risks.
    """
    problem = _problem(exponent, noise_std, w_star_value)
    full = Setting(dim, 1, step_size)
    rows = []
    for index, kind in enumerate(track(list(kinds), description="Q1 kinds")):
        settings = [full] + [Setting(dim, 1, step_size, data=Quantizer(kind, e)) for e in eps]
        result = simulate(problem, settings, seeds, checkpoints, device=_device(ctx))
        labels = [None if index else {"kind": "full precision", "eps": 0.0}]
        labels += [{"kind": kind, "eps": e} for e in eps]
        new_rows = curve_rows(result, problem, labels, paired=[None] + [0] * len(eps))
        if exact:
            _add_exact(
                new_rows, problem, [s for s, label in zip(settings, labels) if label is not None], checkpoints
            )
        rows += new_rows
    last = max(checkpoints)
    fp = _at(rows, last, kind="full precision")
    metrics = {
        f"q1/{r['kind']}_{r['eps']:g}/ratio_to_fp": r["risk_mean"] / fp["risk_mean"]
        for r in rows
        if r["n_steps"] == last and r["eps"] > 0
    }
    for r in rows:
        if r["n_steps"] == last and r["eps"] > 0:
            metrics[f"q1/{r['kind']}_{r['eps']:g}/gap_to_fp"] = r["gap_mean"]
            metrics[f"q1/{r['kind']}_{r['eps']:g}/gap_q_to_fp"] = r["gap_q_mean"]
    metrics.update({f"q1/{k}": v for k, v in bound_summary(rows).items()})
    title = f"Q1: data quantization, d = {dim}, B = 1, γ = {step_size} ({len(seeds)} seeds)"
    return {"metrics": metrics, "tables": {"q1": rows}, "figures": {"q1": curves_figure(rows, title)}}


def _add_exact(
    rows: list[dict], problem: Problem, settings: Sequence[Setting], checkpoints: Sequence[int]
) -> None:
    """Add the exact expected risks (``exact_risk``, ``exact_risk_q``) to rows the recursion covers."""
    n_points = len(sorted(set(checkpoints)))
    for index, setting in enumerate(settings):
        if setting.data.active and setting.data.kind != "additive":
            continue
        values = expected_risk(problem, setting, checkpoints)
        for k, row in enumerate(rows[index * n_points : (index + 1) * n_points]):
            row["exact_risk"], row["exact_risk_q"] = values["risk"][k].item(), values["risk_q"][k].item()


def q2(
    ctx: TaskContext,
    *,
    seeds: Sequence[int] = SEEDS,
    dims: Sequence[int] = (50, 100, 200, 400),
    eps: float = 0.01,
    step_size: float = 0.05,
    kinds: Sequence[str] = ("additive", "multiplicative"),
    checkpoints: Sequence[int] = CHECKPOINTS,
    exponent: float = 2.0,
    noise_std: float = 1.0,
    w_star_value: float = 1.0,
) -> TaskOutput:
    """Q2: data quantization with ε = ``eps`` at each d in ``dims``; the gap to full precision against d."""
    problem = _problem(exponent, noise_std, w_star_value)
    rows = []
    for index, kind in enumerate(track(list(kinds), description="Q2 kinds")):
        settings = [Setting(d, 1, step_size) for d in dims]
        settings += [Setting(d, 1, step_size, data=Quantizer(kind, eps)) for d in dims]
        result = simulate(problem, settings, seeds, checkpoints, device=_device(ctx))
        labels = [None if index else {"kind": "full precision"} for _ in dims] + [
            {"kind": kind} for _ in dims
        ]
        paired = [None] * len(dims) + list(range(len(dims)))  # each d against full precision at that d
        rows += curve_rows(result, problem, labels, paired)
    last = max(checkpoints)
    metrics = {}
    for r in rows:
        if r["n_steps"] == last and r["kind"] != "full precision":
            metrics[f"q2/{r['kind']}_d{r['dim']}/gap_to_fp"] = r["gap_mean"]
            metrics[f"q2/{r['kind']}_d{r['dim']}/gap_q_to_fp"] = r["gap_q_mean"]
    metrics.update({f"q2/{k}": v for k, v in bound_summary(rows).items()})
    title = f"Q2: data quantization with ε = {eps:g} against d, B = 1 ({len(seeds)} seeds)"
    figures = {"q2": dimension_figure(rows, title), "q2_curves": curves_figure(rows, title)}
    return {"metrics": metrics, "tables": {"q2": rows}, "figures": figures}


# The activation, output-gradient and parameter effects are measured on the noise-only problem (w* = 0,
# σ = 0): for additive quantizers the recursion is affine in the second moments, so the expected risk
# increase is the same as on the full problem, while the seed noise of the bias and label-noise terms,
# which swamps an increase of ~1e-5 at B = 64, is gone. Data quantization acts through w*, so it keeps it.
NOISE_ONLY_TARGETS = ("act", "grad", "param")


def batch_effect(
    ctx: TaskContext,
    *,
    seeds: Sequence[int] = SEEDS,
    batch_sizes: Sequence[int] = (1, 4, 16, 64),
    n_steps: int = 4096,
    dim: int = 100,
    step_size: float = 0.05,
    eps: dict[str, float] | None = None,
    exact: bool = True,
    exponent: float = 2.0,
    noise_std: float = 1.0,
    w_star_value: float = 1.0,
) -> TaskOutput:
    """Risk increase over full precision from additive quantization of each target, against B at fixed N."""
    eps = dict(eps or {"act": 1.0, "grad": 1.0, "param": 0.5, "data": 1e-3})
    problems = {
        "noise-only": _problem(exponent, 0.0, 0.0),
        "full": _problem(exponent, noise_std, w_star_value),
    }
    rows = []
    for batch in track(list(batch_sizes), description="batch sizes"):
        for label, problem in problems.items():
            targets = [t for t in eps if (t in NOISE_ONLY_TARGETS) == (label == "noise-only")]
            if not targets:
                continue
            full = Setting(dim, batch, step_size)
            settings = [full] + [
                Setting(dim, batch, step_size, **{t: Quantizer("additive", eps[t])}) for t in targets
            ]
            result = simulate(problem, settings, seeds, [n_steps], device=_device(ctx))
            bounds = [quantized_bound(problem, s, m, [n_steps]) for s, m in zip(settings, result.moments)]
            fp_exact = expected_risk(problem, full, [n_steps])["risk"][-1].item() if exact else math.nan
            for i, target in enumerate(targets, start=1):
                delta = result.risk[i, :, -1] - result.risk[0, :, -1]
                row = {
                    "target": target,
                    "eps": eps[target],
                    "problem": label,
                    "batch_size": batch,
                    "n_steps": n_steps,
                    "risk_fp": result.risk[0, :, -1].mean().item(),
                    "delta_mean": delta.mean().item(),
                    "delta_se": delta.std().item() / len(seeds) ** 0.5,
                    "delta_times_b": delta.mean().item() * batch,
                    "bound_noise_increase": bounds[i].noise - bounds[0].noise,
                }
                if exact:
                    row["exact_delta"] = (
                        expected_risk(problem, settings[i], [n_steps])["risk"][-1].item() - fp_exact
                    )
                rows.append(row)
    first = {r["target"]: r for r in rows if r["batch_size"] == min(batch_sizes)}
    for r in rows:
        r["delta_times_b_vs_b1"] = r["delta_times_b"] / first[r["target"]]["delta_times_b"]
    largest = max(batch_sizes)
    metrics = {
        f"batch/{r['target']}/delta_times_b_vs_b1": r["delta_times_b_vs_b1"]
        for r in rows
        if r["batch_size"] == largest
    }
    title = f"additive quantization per target, d = {dim}, N = {n_steps} steps ({len(seeds)} seeds)"
    return {
        "metrics": metrics,
        "tables": {"batch_effect": rows},
        "figures": {"batch_effect": batch_figure(rows, title)},
    }


def formats(
    ctx: TaskContext,
    *,
    seeds: Sequence[int] = SEEDS,
    dim: int = 200,
    step_size: float = 0.05,
    n_steps: int = 16384,
    int_bits: Sequence[int] = (4, 6, 8, 10, 12),
    int_range: float = 4.0,
    fp_mantissa_bits: Sequence[int] = (2, 3, 7),
    casts: Sequence[str] = ("fp8_e5m2", "fp8_e4m3", "bf16"),
    exponent: float = 2.0,
    noise_std: float = 1.0,
    w_star_value: float = 1.0,
) -> TaskOutput:
    """Data in INT-b (stochastic rounding on [−R, R]), FP-m (stochastic) and real casts; FP-vs-INT rule."""
    problem = _problem(exponent, noise_std, w_star_value)
    families = {
        "int": [(f"INT{b}", Quantizer("int", int_eps(b, int_range))) for b in int_bits],
        "fp": [(f"FP m={m}", Quantizer("fp", fp_eps(m))) for m in fp_mantissa_bits],
        **{cast: [(f"{cast} (round-to-nearest)", Quantizer(cast))] for cast in casts},
    }
    rows = []
    for family, members in track(list(families.items()), description="formats"):
        settings = [Setting(dim, 1, step_size)] + [Setting(dim, 1, step_size, data=q) for _, q in members]
        result = simulate(problem, settings, seeds, [n_steps], device=_device(ctx))
        fp_risk = result.risk[0, :, -1]
        for i, (name, quantizer) in enumerate(members, start=1):
            ratio = result.risk[i, :, -1] / fp_risk
            rows.append(
                {
                    "format": name,
                    "family": family,
                    "eps": quantizer.eps,
                    "risk_mean": result.risk[i, :, -1].mean().item(),
                    "risk_q_mean": result.risk_q[i, :, -1].mean().item(),
                    "risk_fp_mean": fp_risk.mean().item(),
                    "ratio_to_fp": ratio.mean().item(),
                    "ratio_se": ratio.std().item() / len(seeds) ** 0.5,
                }
            )
    # The rule against the observed winner: ratios to full precision are paired within each format's batch,
    # so their difference has s.e. sqrt(se_int² + se_fp²); closer than 2 s.e. is a tie, left out of the count.
    rule = []
    by_name = {r["format"]: r for r in rows}
    for b in int_bits:
        for m in fp_mantissa_bits:
            predicted = "FP" if m >= b - exponent / 2 * math.log2(dim) else "INT"
            int_row, fp_row = by_name[f"INT{b}"], by_name[f"FP m={m}"]
            difference = int_row["ratio_to_fp"] - fp_row["ratio_to_fp"]
            if abs(difference) < 2 * math.hypot(int_row["ratio_se"], fp_row["ratio_se"]):
                observed = "tie"
            else:
                observed = "FP" if difference > 0 else "INT"
            rule.append(
                {
                    "int_bits": b,
                    "fp_mantissa_bits": m,
                    "predicted": predicted,
                    "observed": observed,
                    "int_ratio_to_fp": int_row["ratio_to_fp"],
                    "fp_ratio_to_fp": fp_row["ratio_to_fp"],
                }
            )
    decided = [r for r in rule if r["observed"] != "tie"]
    agree = sum(r["predicted"] == r["observed"] for r in decided) / len(decided) if decided else math.nan
    metrics = {f"formats/{r['format']}/ratio_to_fp": r["ratio_to_fp"] for r in rows}
    metrics["formats/rule_agreement"] = agree
    metrics["formats/rule_decided_pairs"] = float(len(decided))
    return {"metrics": metrics, "tables": {"formats": rows, "fp_vs_int_rule": rule}}
