"""``litlab-run`` tasks: ``sparsed/eval`` (SparseD's arms against dense decoding on one example set) and
``sparsed/study`` (the arms over several seeded example sets, the ρ and s sweeps, and the three observations,
with the paper-vs-ours table)."""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import Any

import torch
from transformers import PreTrainedModel

from litlab.core.errors import ConfigError
from litlab.core.progress import track
from litlab.core.results import TaskOutput
from litlab.core.stats import format_mean_sd
from litlab.datamodules.retrieval_text import RetrievalTextDataModule
from litlab.lm import load_pretrained
from litlab.methods.sparsed.analysis import observations, record_importance
from litlab.methods.sparsed.decoding import select_step
from litlab.methods.sparsed.evaluation import ARMS, compare_arms
from litlab.methods.sparsed.model import Recipe, pretrained
from litlab.task import TaskContext

PAPER = {
    "lossless": "SparseD ≈ dense: average 72.42 → 72.38 (Dream-7B), 67.33 → 67.62 (LLaDA-1.5), "
    "README Table 1",
    "s0": "(figure only) early steps critical: sparse from the start loses accuracy",
    "fixed": "sliding window / StreamingLLM fall to about 40 on RULER-4k (from 90)",
    "speed": "1.24-1.25x at 64k (T = 128), up to 1.50x at 64k with 1024 steps; no gain at 4k/8k",
}


def _model(
    ctx: TaskContext, model_path: str | None, recipe: Recipe
) -> tuple[PreTrainedModel, RetrievalTextDataModule]:
    """The model to decode (a local checkpoint, or the cached recipe model trained through ctx.fitter)."""
    model = load_pretrained(model_path)[0].eval() if model_path else pretrained(recipe, ctx.fitter)[0]
    return model, RetrievalTextDataModule(
        length=recipe.length, n_keys=recipe.n_keys, value_length=recipe.value_length, n_test=256
    )


KINDS = ("continuation", "retrieval")


def _recipe(overrides: Mapping[str, Any] | None, where: str = "task.recipe") -> Recipe:
    """The cached model's recipe with ``task.recipe`` overrides (e.g. ``length: 512`` trains and caches a
    model on 512-token examples); a nested ``init`` mapping is the recipe it fine-tunes."""
    fields = set(Recipe.__dataclass_fields__)
    values = dict(overrides or {})
    unknown = sorted(set(values) - fields)
    if unknown:
        raise ConfigError(f"{where} has unknown keys {unknown}; choose from {', '.join(sorted(fields))}")
    if values.get("init") is not None:
        values["init"] = _recipe(values["init"], f"{where}.init")
    return Recipe(**values)


def _examples(recipe: Recipe, seed: int, n: int, kind: str = "continuation") -> torch.Tensor:
    """``n`` test examples drawn with data ``seed``: plain filler windows whose last 16 tokens are decoded
    (``continuation``), or retrieval prompts with new needles and questions (``retrieval``)."""
    data = RetrievalTextDataModule(
        length=recipe.length, n_keys=recipe.n_keys, value_length=recipe.value_length, n_test=n, seed=seed
    )
    if kind == "continuation":
        return data.continuations(n, seed)
    if kind == "retrieval":
        return data.split("test")["input_ids"]
    raise ConfigError(f"kind={kind!r}; choose one of {', '.join(KINDS)}")


def evaluate(
    ctx: TaskContext,
    *,
    model_path: str | None = None,
    kind: str = "continuation",
    n_examples: int = 64,
    steps: int = 16,
    s: float = 0.2,
    rho: float = 0.3,
    block: int = 16,
    arms: Sequence[str] = tuple(ARMS),
    data_seed: int = 1000,
    recipe: dict[str, Any] | None = None,
) -> TaskOutput:
    """Decode ``n_examples`` prompts of ``kind`` densely and with each SparseD arm; one row per arm."""
    recipe = _recipe(recipe)
    model, data = _model(ctx, model_path, recipe)
    inputs = _examples(recipe, data_seed, n_examples, kind)
    unknown = sorted(set(arms) - set(ARMS))
    if unknown:
        raise ConfigError(f"task.arms has unknown arms {unknown}; choose from {', '.join(ARMS)}")
    chosen = {a: ARMS[a] for a in arms}
    rows = compare_arms(
        model, inputs, data.gen_length, steps, s, rho, block, chosen, two_values=kind == "retrieval"
    )
    metrics = {
        f"{row['arm']}/{key}": row[key] for row in rows for key in ("agreement", "exact_match", "density")
    }
    return {"metrics": metrics, "tables": {"arms": rows}}


SUMMARY_KEYS = ("agreement", "exact_match_dense", "exact_match", "token_accuracy", "swapped_token_accuracy")


def _summary(per_seed: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Mean ± sd over example sets of each (kind, arm)."""
    summary = []
    for kind in dict.fromkeys(row["kind"] for row in per_seed):
        for name in dict.fromkeys(row["arm"] for row in per_seed):
            rows = [row for row in per_seed if row["arm"] == name and row["kind"] == kind]
            summary.append(
                {
                    "kind": kind,
                    "arm": name,
                    **{
                        key: format_mean_sd([r[key] for r in rows], digits=3)
                        for key in SUMMARY_KEYS
                        if key in rows[0]  # the swapped-value accuracy: retrieval rows only
                    },
                    "density": f"{rows[0]['density']:.3f}",
                    "attention_cost": f"{rows[0]['attention_cost']:.3f}",
                }
            )
    return summary


def study(
    ctx: TaskContext,
    *,
    seeds: list[int],
    kinds: Sequence[str] = KINDS,
    n_examples: int = 64,
    steps: int = 16,
    s: float = 0.2,
    rho: float = 0.3,
    block: int = 16,
    rhos: Sequence[float] = (0.1, 0.2, 0.3),
    skips: Sequence[float] = (0.0, 0.1, 0.2, 0.4),
    analysis_examples: int = 8,
    recipe: dict[str, Any] | None = None,
) -> TaskOutput:
    """SparseD's small-scale check: the arms on ``seeds`` example sets of each kind (mean ± sd over sets),
    SparseD at each ρ and s on the first set of the first kind, and the observations from dense decoding."""
    import matplotlib.pyplot as plt

    recipe = _recipe(recipe)
    model, data = _model(ctx, None, recipe)
    gen = data.gen_length
    per_seed: list[dict[str, Any]] = []
    for kind, seed in track([(k, sd) for k in kinds for sd in seeds], "example sets"):
        inputs = _examples(recipe, seed, n_examples, kind)
        rows = compare_arms(model, inputs, gen, steps, s, rho, block, two_values=kind == "retrieval")
        per_seed += [{"kind": kind, "seed": seed, **row} for row in rows]
    summary = _summary(per_seed)
    first = _examples(recipe, seeds[0], n_examples, kinds[0])
    sweep = []
    for value, skip in [(r, s) for r in rhos] + [(rho, sk) for sk in skips]:
        row = compare_arms(model, first, gen, steps, skip, value, block, {"sparsed": {}})[1]
        sweep.append(
            {"rho": value, "s": skip, **{k: row[k] for k in ("agreement", "exact_match_dense", "density")}}
        )
    importance = record_importance(model, first[:analysis_examples, :-gen], gen, steps, block)
    at = select_step(steps, s)
    seen = observations(importance, at)

    def cell(kind: str, arm: str, key: str = "agreement") -> str:
        return next((r[key] for r in summary if r["kind"] == kind and r["arm"] == arm), "(not run)")

    def per_kind(arm: str) -> str:
        """The arm's token agreement with dense on each kind run, and its exact match on retrieval (dense's
        beside it)."""
        parts = [f"{kind} agreement {cell(kind, arm)}" for kind in kinds]
        if "retrieval" in kinds:
            dense = cell("retrieval", "dense", "exact_match")
            parts.append(f"retrieval exact match {cell('retrieval', arm, 'exact_match')} (dense {dense})")
        return "; ".join(parts)

    metrics: dict[str, float] = {}
    for kind in kinds:
        for name in ARMS | {"dense": {}}:
            rows = [r for r in per_seed if r["kind"] == kind and r["arm"] == name]
            metrics[f"{kind}/{name}/agreement"] = statistics.mean(r["agreement"] for r in rows)
            metrics[f"{kind}/{name}/exact_match"] = statistics.mean(r["exact_match"] for r in rows)
    metrics |= {k: v for k, v in seen.items() if not isinstance(v, list)}
    paper_vs_ours = [
        {
            "claim": "SparseD (s=0.2, rho=0.3) is lossless vs dense",
            "paper": PAPER["lossless"],
            "ours": f"{per_kind('sparsed')}; density {cell(kinds[0], 'sparsed', 'density')}",
        },
        {
            "claim": "early dense steps matter (s=0 loses more)",
            "paper": PAPER["s0"],
            "ours": f"s=0: {per_kind('no_skip_s0')}",
        },
        {
            "claim": "head-specific beats a head-averaged pattern",
            "paper": "(ablation in the paper's figures)",
            "ours": f"head-averaged: {per_kind('head_average')}",
        },
        {
            "claim": "fixed sink + window loses",
            "paper": PAPER["fixed"],
            "ours": f"sink + window: {per_kind('sink_window')}",
        },
        {
            "claim": "patterns differ across heads",
            "paper": "observation 1 (figure)",
            "ours": f"cross-head cosine of tile importance {seen['cross_head_cosine']:.3f}",
        },
        {
            "claim": "patterns similar across steps",
            "paper": "observation 2 (figure)",
            "ours": "cosine with the selection step's map, later steps "
            f"{seen['cross_step_cosine_after_select']:.3f}",
        },
        {
            "claim": "speed-up",
            "paper": PAPER["speed"],
            "ours": "see benchmarks/results/sparsed_attention_speed.json (CPU)",
        },
    ]
    fig, axes = plt.subplots(1, 3, figsize=(14, 4))
    axes[0].plot(range(len(seen["cross_step_cosine"])), seen["cross_step_cosine"], marker="o")
    axes[0].axvline(at, color="grey", linestyle="--", label="selection step")
    axes[0].set(
        xlabel="denoising step", ylabel="cosine with the selection step", title="cross-step similarity"
    )
    axes[0].legend()
    skip_rows = sorted(sweep[len(rhos) :], key=lambda r: r["s"])  # the s sweep alone
    axes[1].plot([r["s"] for r in skip_rows], [r["agreement"] for r in skip_rows], marker="o")
    axes[1].set(xlabel="dense share s", ylabel="token agreement with dense", title="early-step importance")
    axes[2].imshow(torch.cat(list(importance[at, 0, 0]), 1).numpy(), cmap="viridis")
    axes[2].set(title="layer 0 tile importance, heads side by side", xlabel="key block", ylabel="query block")
    fig.tight_layout()
    steps_table = [{"step": i, "cross_step_cosine": c} for i, c in enumerate(seen["cross_step_cosine"])]
    return {
        "metrics": metrics,
        "tables": {
            "paper_vs_ours": paper_vs_ours,
            "arms": summary,
            "arms_per_seed": per_seed,
            "sweep": sweep,
            "observations": steps_table,
        },
        "figures": {"observations": fig},
    }
