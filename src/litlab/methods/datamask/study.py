"""The DATAMASK study (``litlab-run task=datamask/study``): on each seed's pool, every selector's joint
objective and time, then tiny LMs pretrained on the joint, quality-only, diversity-only and random subsets
for the same number of tokens (several epochs), scored on held-out clean documents of every domain."""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence

import matplotlib.pyplot as plt
import torch

from litlab.core.progress import track
from litlab.core.results import TaskOutput
from litlab.core.stats import format_mean_sd
from litlab.datamodules.selection import DOMAINS, KINDS, SelectionPool, make_pool
from litlab.datamodules.tokenizers import cached_bpe
from litlab.methods.datamask.baselines import greedy_select, random_select, topk_quality
from litlab.methods.datamask.downstream import pretrain_and_score
from litlab.methods.datamask.objective import subset_objective
from litlab.methods.datamask.selector import Selection, datamask_select
from litlab.task import TaskContext

# the paper's headline numbers (arXiv 2512.24265, abstract / official README)
PAPER = {
    "selection_time_saved_vs_greedy": "98.9 % (estimated vs DiSF)",
    "avg_gain_12_tasks_1.5B_dense": "+3.2 %",
    "avg_gain_12_tasks_7B_moe": "+1.9 %",
}
LM_ARMS = {
    "datamask": "joint (DATAMASK)",
    "topk_quality": "quality only",
    "greedy_diversity": "diversity only",
    "random": "random",
}


def _selectors(pool: SelectionPool, ratio: float, lam: float, seed: int, **options) -> dict[str, Callable]:
    q, e = pool.quality, pool.embeddings
    return {
        "datamask": lambda: datamask_select(q, e, ratio, lam=lam, seed=seed, **options),
        "datamask_no_context": lambda: datamask_select(
            q, e, ratio, lam=lam, seed=seed, context=False, **options
        ),
        "greedy": lambda: greedy_select(q, e, ratio, lam, seed),
        "greedy_diversity": lambda: greedy_select(q, e, ratio, 0.0, seed),
        "topk_quality": lambda: topk_quality(q, ratio),
        "random": lambda: random_select(len(pool), ratio, seed),
    }


def _cell(values: Sequence[float]) -> str:
    """A summary-table cell: ``mean ± sd`` over seeds to 4 decimals."""
    return format_mean_sd(values, digits=4)


def study(
    ctx: TaskContext,
    *,
    seeds: list[int],
    lm_seeds: list[int],
    n_documents: int = 10_000,
    ratio: float = 0.1,
    lam: float = 0.5,
    steps: int = 30,
    group_size: int = 8,
    shard_size: int = 8,
    lr: float = 0.35,
    context_every: int = 6,
    vocab_size: int = 512,
    block_size: int = 64,
    batch_size: int = 32,
    lm_steps: int = 300,
    lm_eval_every: int = 50,
    lm_lr: float = 3e-3,
    hidden_size: int = 64,
    num_layers: int = 2,
) -> TaskOutput:
    """Selectors on ``seeds`` pools; LMs on the ``lm_seeds`` pools (a subset of ``seeds``)."""
    options = dict(
        steps=steps, group_size=group_size, shard_size=shard_size, lr=lr, context_every=context_every
    )
    objective_rows, composition_rows, lm_rows = [], [], []
    curves: dict[str, list] = {arm: [] for arm in LM_ARMS}
    arch = {"hidden_size": hidden_size, "num_layers": num_layers, "num_heads": 4}
    for seed in track(seeds, "datamask study (seeds)"):
        pool = make_pool(n_documents, seed=seed)
        chosen: dict[str, Selection] = {}
        for name, run in _selectors(pool, ratio, lam, seed, **options).items():
            chosen[name] = run()
            scores = subset_objective(chosen[name].indices, pool.quality, pool.embeddings, lam)
            objective_rows.append({"seed": seed, "selector": name, **scores, "seconds": chosen[name].seconds})
            kinds = torch.bincount(pool.kind[chosen[name].indices], minlength=3)
            domains = torch.bincount(pool.domain[chosen[name].indices] + 1, minlength=len(DOMAINS) + 1)
            composition_rows.append(
                {
                    "seed": seed,
                    "selector": name,
                    **{f"kind_{k}": int(kinds[i]) for i, k in enumerate(KINDS)},
                    **{f"domain_{d}": int(domains[i + 1]) for i, d in enumerate(DOMAINS)},
                }
            )
        if seed not in lm_seeds:
            continue
        tokenizer = cached_bpe(pool.texts, vocab_size)
        for arm in LM_ARMS:
            texts = [pool.texts[i] for i in chosen[arm].indices.tolist()]
            out = pretrain_and_score(
                ctx.fitter,
                tokenizer,
                texts,
                pool.heldout,
                steps=lm_steps,
                eval_every=lm_eval_every,
                block_size=block_size,
                batch_size=batch_size,
                arch=arch,
                lr=lm_lr,
                seed=seed,
            )
            curves[arm].append(out["curve"])
            lm_rows.append(
                {
                    "seed": seed,
                    "subset": arm,
                    "mean_bpb": out["mean_bpb"],
                    "epochs": out["epochs"],
                    **{f"bpb_{d}": v for d, v in out["bpb"].items()},
                }
            )
    return _report(objective_rows, composition_rows, lm_rows, curves, n_documents)


def _report(
    objective_rows: list, composition_rows: list, lm_rows: list, curves: dict, n_documents: int
) -> TaskOutput:
    by = lambda rows, key, name, field: [r[field] for r in rows if r[key] == name]  # noqa: E731
    selectors = sorted(
        {r["selector"] for r in objective_rows}, key=[r["selector"] for r in objective_rows].index
    )
    summary = []
    for name in selectors:
        summary.append(
            {
                "selector": name,
                "objective": _cell(by(objective_rows, "selector", name, "objective")),
                "quality": _cell(by(objective_rows, "selector", name, "quality")),
                "diversity_norm": _cell(by(objective_rows, "selector", name, "diversity_norm")),
                "seconds": _cell(by(objective_rows, "selector", name, "seconds")),
            }
        )
    lm_summary = []
    for arm, label in LM_ARMS.items():
        rows = [r for r in lm_rows if r["subset"] == arm]
        lm_summary.append(
            {
                "subset": label,
                "mean_bpb": _cell([r["mean_bpb"] for r in rows]),
                "epochs": _cell([r["epochs"] for r in rows]),
                **{f"bpb_{d}": _cell([r[f"bpb_{d}"] for r in rows]) for d in DOMAINS},
            }
        )
    objective = {n: statistics.mean(by(objective_rows, "selector", n, "objective")) for n in selectors}
    seconds = {n: statistics.mean(by(objective_rows, "selector", n, "seconds")) for n in selectors}
    bpb = {arm: statistics.mean([r["mean_bpb"] for r in lm_rows if r["subset"] == arm]) for arm in LM_ARMS}
    seeds = sorted({r["seed"] for r in lm_rows})
    joint_wins = {
        other: sum(
            by([r for r in lm_rows if r["seed"] == s], "subset", "datamask", "mean_bpb")[0]
            < by([r for r in lm_rows if r["seed"] == s], "subset", other, "mean_bpb")[0]
            for s in seeds
        )
        for other in LM_ARMS
        if other != "datamask"
    }
    metrics = {
        **{f"objective/{n}": v for n, v in objective.items()},
        **{f"seconds/{n}": v for n, v in seconds.items()},
        **{f"lm_mean_bpb/{arm}": v for arm, v in bpb.items()},
        **{f"lm_joint_wins_vs/{other}": float(w) for other, w in joint_wins.items()},
        "objective_fraction_of_greedy_gap_closed": (objective["datamask"] - objective["random"])
        / (objective["greedy"] - objective["random"]),
        "speedup_vs_greedy": seconds["greedy"] / seconds["datamask"],
        "lm_seeds": float(len(seeds)),
    }
    n_seeds = len(seeds)
    time_ours = (
        f"DATAMASK {seconds['datamask']:.2f} s vs exact greedy {seconds['greedy']:.2f} s, N = {n_documents} "
        f"(ratio {metrics['speedup_vs_greedy']:.2f}); N = 10^5, 10^6: benchmarks/results/datamask_speed.json"
    )
    objective_ours = (
        f"DATAMASK {objective['datamask']:.4f}, greedy {objective['greedy']:.4f}, top-k quality "
        f"{objective['topk_quality']:.4f}, random {objective['random']:.4f}"
    )
    lm_paper = (
        f"{PAPER['avg_gain_12_tasks_1.5B_dense']} (1.5B dense), {PAPER['avg_gain_12_tasks_7B_moe']} (7B MoE)"
    )
    lm_ours = (
        f"held-out bpb joint {bpb['datamask']:.4f}, quality-only {bpb['topk_quality']:.4f}, diversity-only "
        f"{bpb['greedy_diversity']:.4f}, random {bpb['random']:.4f}; joint lower on "
        f"{joint_wins['topk_quality']}/{n_seeds} and {joint_wins['greedy_diversity']}/{n_seeds} seeds"
    )
    paper_vs_ours = [
        {
            "claim": "selection time vs greedy",
            "paper": PAPER["selection_time_saved_vs_greedy"],
            "ours": time_ours,
        },
        {"claim": "joint objective reached", "paper": "(not reported)", "ours": objective_ours},
        {"claim": "joint subset beats single-metric subsets", "paper": lm_paper, "ours": lm_ours},
    ]
    fig, ax = plt.subplots(figsize=(6, 4))
    for arm, label in LM_ARMS.items():
        runs = [c for c in curves[arm] if c]
        if runs:
            steps = [s for s, _ in runs[0]]
            mean = [statistics.mean(run[i][1] for run in runs) for i in range(len(steps))]
            ax.plot(steps, mean, marker="o", label=label)
    ax.set_xlabel("training step (equal tokens for every subset)")
    ax.set_ylabel("held-out bpb, all domains")
    ax.legend()
    ax.set_title("tiny LMs pretrained on 10 % subsets")
    return {
        "metrics": metrics,
        "tables": {
            "paper_vs_ours": paper_vs_ours,
            "selectors": summary,
            "selectors_per_seed": objective_rows,
            "composition": composition_rows,
            "lm": lm_summary,
            "lm_per_seed": lm_rows,
        },
        "figures": {"lm_curves": fig},
    }
