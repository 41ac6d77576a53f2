"""The quantsgd study: Q1, Q2, the batch-size effect and number formats in one run, the Lightning module
checked against the simulator, and the paper-vs-ours table (``litlab-run task=quantsgd/study``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch

from litlab.contract import bind
from litlab.core.progress import track
from litlab.core.results import TaskOutput
from litlab.datamodules.linear_regression import LinearRegressionDataModule
from litlab.methods.quantsgd.module import QuantizedSGDRegressor, parse_quantizers
from litlab.methods.quantsgd.simulator import Problem, Setting, simulate
from litlab.methods.quantsgd.tasks import SEEDS, batch_effect, formats, q1, q2
from litlab.task import TaskContext

LIGHTNING_SETTINGS = {
    "full precision": {},
    "data=additive(0.01)": {"data": {"kind": "additive", "eps": 0.01}},
}


def lightning_check(
    ctx: TaskContext,
    seeds: Sequence[int],
    sim_seeds: Sequence[int],
    dim: int,
    step_size: float,
    n_steps: int,
) -> list[dict[str, Any]]:
    """Final risk of the LightningModule trained through ``ctx.fitter``, beside the simulator's spread."""
    rows = []
    problem = Problem()
    for name, quantizers in LIGHTNING_SETTINGS.items():
        setting = Setting(dim, 1, step_size, **parse_quantizers(quantizers))
        reference = simulate(problem, [setting], sim_seeds, [n_steps], device=ctx.fitter.fabric.device).risk[
            0, :, 0
        ]
        runs = []
        for seed in track(list(seeds), description=f"Lightning {name}"):
            data = LinearRegressionDataModule(
                dim=dim, n_train=n_steps, n_val=256, n_test=256, batch_size=1, seed=seed
            )
            module = QuantizedSGDRegressor(step_size=step_size, quantizers=quantizers)
            bind(module, data)
            ctx.fitter.fit(module, data, max_epochs=1, seed=seed)
            runs.append(module.risks()["excess_risk"].item())
        runs_t = torch.tensor(runs, dtype=torch.float64)
        spread = (reference.var() / len(reference) + runs_t.var() / len(runs_t)).sqrt().item()
        rows.append(
            {
                "setting": name,
                "n_steps": n_steps,
                "lightning_mean": runs_t.mean().item(),
                "lightning_sd": runs_t.std().item(),
                "simulator_mean": reference.mean().item(),
                "simulator_sd": reference.std().item(),
                "z": (runs_t.mean().item() - reference.mean().item()) / spread,
            }
        )
    return rows


def _fmt(values: Sequence[float], digits: int = 3) -> str:
    return " / ".join(f"{v:.{digits}g}" for v in values)


def _increasing(values: Sequence[float]) -> bool:
    return all(a < b for a, b in zip(values, values[1:]))


def paper_vs_ours(
    metrics: Mapping[str, float], q1_eps: Sequence[float], dims: Sequence[int], n_steps: int, batch: int
) -> list[dict[str, str]]:
    """The paper's qualitative claims beside our numbers, each verdict decided by the stated criterion."""
    m = metrics
    mul = [m[f"q1/multiplicative_{e:g}/ratio_to_fp"] for e in q1_eps]
    add = [m[f"q1/additive_{e:g}/ratio_to_fp"] for e in q1_eps]
    gap_q = {k: [m[f"q2/{k}_d{d}/gap_q_to_fp"] for d in dims] for k in ("additive", "multiplicative")}
    gap = {k: [m[f"q2/{k}_d{d}/gap_to_fp"] for d in dims] for k in ("additive", "multiplicative")}
    per_b = {t: m[f"batch/{t}/delta_times_b_vs_b1"] for t in ("act", "grad", "param", "data")}
    bounds = [k.split("/")[0] for k in m if k.endswith("/bound/points")]
    violations = int(sum(m[f"{b}/bound/violations"] for b in bounds))
    points = int(sum(m[f"{b}/bound/points"] for b in bounds))
    tight = min(m[f"{b}/bound/min_ratio"] for b in bounds)
    loose = max(m[f"{b}/bound/max_ratio"] for b in bounds)
    eps_text = ", ".join(f"{e:g}" for e in q1_eps)
    additive_rise = gap_q["additive"][-1] - gap_q["additive"][0]
    multiplicative_rise = abs(gap_q["multiplicative"][-1] - gap_q["multiplicative"][0])
    clean_flat = abs(gap["additive"][-1] - gap["additive"][0]) < 0.1 * abs(gap["additive"][0])
    q2_verdict = (
        "reproduced" if additive_rise > 0 and multiplicative_rise < 0.1 * additive_rise else "not reproduced"
    )
    q2_verdict += " (quantized test inputs)" + (
        "; on clean inputs the additive gap is flat in d" if clean_flat else ""
    )
    slow = min(per_b["param"], per_b["data"])
    return [
        {
            "claim": f"Q1: multiplicative data quantization tracks full precision (ε = {eps_text})",
            "paper": "curves overlap (figure; no numbers)",
            "ours": f"clean risk / full precision at N = {n_steps}: {_fmt(mul, 4)}",
            "criterion": "every ratio within 5% of 1",
            "verdict": "reproduced" if max(abs(r - 1) for r in mul) < 0.05 else "not reproduced",
        },
        {
            "claim": "Q1: additive (INT-like) data quantization degrades with ε",
            "paper": "risk grows with ε (figure)",
            "ours": f"clean risk / full precision at N = {n_steps}: {_fmt(add)}",
            "criterion": "ratios increase with ε and the largest exceeds 1.1",
            "verdict": "reproduced" if _increasing(add) and add[-1] > 1.1 else "not reproduced",
        },
        {
            "claim": f"Q2: additive worsens with d, multiplicative does not (ε = 0.01, d = {_fmt(dims)})",
            "paper": "additive grows with d (figure)",
            "ours": (
                f"gap to full precision at N = {n_steps}, quantized test inputs: "
                f"additive {_fmt(gap_q['additive'])}, multiplicative {_fmt(gap_q['multiplicative'])}; "
                f"clean inputs: additive {_fmt(gap['additive'])}, "
                f"multiplicative {_fmt(gap['multiplicative'])}"
            ),
            "criterion": "the additive gap rises from first to last d; multiplicative moves < 10% as much",
            "verdict": q2_verdict,
        },
        {
            "claim": "activation and output-gradient quantization noise falls as 1/B",
            "paper": "their σ_G² terms are divided by B (theory)",
            "ours": f"Δrisk·B at B = {batch} over Δrisk at B = 1: act {per_b['act']:.3g}, "
            f"grad {per_b['grad']:.3g}",
            "criterion": "both within 30% of 1",
            "verdict": "reproduced"
            if max(abs(per_b[t] - 1) for t in ("act", "grad")) < 0.3
            else "not reproduced",
        },
        {
            "claim": "parameter and data quantization effects do not fall as 1/B",
            "paper": "α_B·tr(H ε_p ε_pᵀ) and the spectrum/approximation terms carry no 1/B (theory)",
            "ours": f"Δrisk·B at B = {batch} over Δrisk at B = 1: param {per_b['param']:.3g}, "
            f"data {per_b['data']:.3g}",
            "criterion": "both above 2 (a 1/B effect gives 1)",
            "verdict": "reproduced" if slow > 2 else "not reproduced",
        },
        {
            "claim": "the excess-risk upper bound (reconstructed; the paper never overlays it)",
            "paper": "upper bound; loose for additive quantization (reviewers)",
            "ours": f"{violations} violations at {points} (setting, N) points where it claims to hold; "
            f"bound / simulated risk from {tight:.3g} to {loose:.3g}",
            "criterion": "no simulated mean above the bound",
            "verdict": "holds" if violations == 0 else f"violated at {violations} points",
        },
        {
            "claim": "FP beats INT when m ≥ b − (a/2)·log2 d (third-party note, unverified)",
            "paper": "not in the paper text we have",
            "ours": f"the rule names the observed winner in {m['formats/rule_agreement']:.0%} of the "
            f"{m['formats/rule_decided_pairs']:.0f} (b, m) pairs that are not a tie within 2 s.e.",
            "criterion": "see the fp_vs_int_rule table",
            "verdict": "agrees" if m["formats/rule_agreement"] == 1 else "partly agrees",
        },
    ]


def study(
    ctx: TaskContext,
    *,
    seeds: Sequence[int] = SEEDS,
    q1_args: Mapping[str, Any] | None = None,
    q2_args: Mapping[str, Any] | None = None,
    batch_args: Mapping[str, Any] | None = None,
    formats_args: Mapping[str, Any] | None = None,
    lightning_seeds: Sequence[int] = (0, 1, 2, 3, 4),
    lightning_steps: int = 4096,
) -> TaskOutput:
    """Run Q1, Q2, the batch effect and the formats on ``seeds``; the Lightning check; paper vs ours."""
    metrics: dict[str, float] = {}
    tables: dict[str, Any] = {}
    figures: dict[str, Any] = {}
    q1_args, q2_args = dict(q1_args or {}), dict(q2_args or {})
    parts = [
        (q1, q1_args),
        (q2, q2_args),
        (batch_effect, dict(batch_args or {})),
        (formats, dict(formats_args or {})),
    ]
    for task, args in track(parts, description="quantsgd study"):
        output = task(ctx, seeds=seeds, **args)
        metrics.update(output.get("metrics", {}))
        tables.update(output.get("tables", {}))
        figures.update(output.get("figures", {}))
    check = lightning_check(
        ctx, lightning_seeds, seeds, q1_args.get("dim", 200), q1_args.get("step_size", 0.05), lightning_steps
    )
    tables["lightning_check"] = check
    metrics.update({f"lightning/{r['setting']}/z": r["z"] for r in check})
    q1_eps = q1_args.get("eps", (1e-3, 5e-3, 1e-2))
    dims = q2_args.get("dims", (50, 100, 200, 400))
    n_steps = max(r["n_steps"] for r in tables["q1"])
    batch = max(r["batch_size"] for r in tables["batch_effect"])
    tables["paper_vs_ours"] = paper_vs_ours(metrics, q1_eps, dims, n_steps, batch)
    return {"metrics": metrics, "tables": tables, "figures": figures}
