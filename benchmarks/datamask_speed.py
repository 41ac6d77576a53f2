"""DATAMASK's selector against exact greedy on the same joint objective (the DiSF-style peer).

Pool: ``mixture_pool`` (Gaussian-mixture unit embeddings, d = 64, whose tight clusters carry the high
quality), r = 10 %, λ = 0.5. At N = 10⁵ every selector runs once: DATAMASK at its default (30 steps,
lr 0.35, G = 8, shards of 8, context every 6 steps), a fast setting (24 steps, lr 0.4) and a thorough
one (36 steps, lr 0.25), our incremental exact greedy (O(N·d) per pick), top-k quality and random; each
selection is
scored on the same global objective. The per-candidate greedy (what one writes from DiSF's description:
eᵀSe for every candidate from the current d×d sum S, O(N·d²) per pick) is timed over 50 picks and
extrapolated to all k picks (its per-pick cost does not change with the pick). At N = 10⁶ only DATAMASK
runs (its peak memory is recorded); greedy's time there is extrapolated from N = 10⁵ by its O(r·N²·d)
cost. Extrapolated numbers are marked ``estimated``. Wall time and process CPU time are both recorded: on
a shared machine CPU time is the steadier of the two.

Run:  python benchmarks/datamask_speed.py [--quick | --smoke]
Writes benchmarks/results/datamask_speed.json (``--quick``: N = 10⁴ and 10⁵ only, datamask_speed_quick.json;
``--smoke``: N = 10³ only, datamask_speed_smoke.json).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import time
from collections.abc import Callable
from pathlib import Path

import torch
from _smoke import SMOKE_HELP, suffix

from litlab.core.machine import machine_info
from litlab.datamodules.selection import mixture_pool
from litlab.methods.datamask.baselines import greedy_select, random_select, topk_quality
from litlab.methods.datamask.objective import subset_objective
from litlab.methods.datamask.selector import Selection, budget, datamask_select

RESULTS = Path(__file__).resolve().parent / "results"
RATIO, LAM, TARGET_SPEEDUP = 0.1, 0.5, 50.0
DATAMASK_ARMS = ("datamask", "datamask_fast", "datamask_thorough")


def timed(run: Callable[[], Selection]) -> tuple[Selection, float, float]:
    """The selection with its wall and CPU seconds."""
    wall, cpu = time.perf_counter(), time.process_time()
    selection = run()
    return selection, time.perf_counter() - wall, time.process_time() - cpu


def per_candidate_greedy_pick_seconds(embeddings: torch.Tensor, picks: int = 50) -> tuple[float, float]:
    """Wall and CPU seconds of one pick of the per-candidate greedy: eᵢᵀSeᵢ for every candidate."""
    moment = torch.zeros(embeddings.shape[1], embeddings.shape[1])
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(picks):
        values = ((embeddings @ moment) * embeddings).sum(1)
        pick = int(values.argmin())
        moment += torch.outer(embeddings[pick], embeddings[pick])
    return (time.perf_counter() - wall) / picks, (time.process_time() - cpu) / picks


def run_size(n: int, greedy: bool) -> dict:
    """Every selector at pool size ``n``: objective, wall and CPU seconds."""
    quality, embeddings = mixture_pool(n, seed=0)
    arms: dict[str, Callable[[], Selection]] = {
        "datamask": lambda: datamask_select(quality, embeddings, RATIO, lam=LAM, seed=0),
        "datamask_fast": lambda: datamask_select(
            quality, embeddings, RATIO, lam=LAM, steps=24, lr=0.4, seed=0
        ),
        "datamask_thorough": lambda: datamask_select(
            quality, embeddings, RATIO, lam=LAM, steps=36, lr=0.25, seed=0
        ),
        "topk_quality": lambda: topk_quality(quality, RATIO),
        "random": lambda: random_select(n, RATIO),
    }
    if greedy:
        arms["greedy"] = lambda: greedy_select(quality, embeddings, RATIO, LAM)
    row: dict = {"n_documents": n, "budget": budget(n, RATIO)}
    for name, run in arms.items():
        start_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        selection, wall, cpu = timed(run)
        row[name] = {
            **subset_objective(selection.indices, quality, embeddings, LAM),
            "wall_s": wall,
            "cpu_s": cpu,
            "peak_rss_mb_after": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "peak_rss_mb_before": start_rss / 1024,
        }
        print(
            f"N={n:>8} {name:15s} J={row[name]['objective']:.4f} wall={wall:8.2f}s cpu={cpu:8.2f}s",
            flush=True,
        )
    pick_wall, pick_cpu = per_candidate_greedy_pick_seconds(embeddings)
    k = budget(n, RATIO)
    row["per_candidate_greedy_estimated"] = {"wall_s": pick_wall * k, "cpu_s": pick_cpu * k}
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="N = 10^4 and 10^5 only")
    parser.add_argument("--smoke", action="store_true", help=SMOKE_HELP)
    args = parser.parse_args()
    torch.set_num_threads(1)
    rows = [run_size(n, True) for n in ([1_000] if args.smoke else [10_000, 100_000])]
    if not (args.quick or args.smoke):
        rows.append(run_size(1_000_000, False))
        ref = rows[1]["greedy"]
        rows[2]["greedy_estimated"] = {key: ref[key] * 100.0 for key in ("wall_s", "cpu_s")}
    summary = {}
    for row in rows:
        greedy = row.get("greedy") or row["greedy_estimated"]
        for arm in DATAMASK_ARMS:
            summary[f"N={row['n_documents']}/{arm}"] = {
                "speedup_vs_greedy_cpu": greedy["cpu_s"] / row[arm]["cpu_s"],
                "speedup_vs_per_candidate_greedy_cpu": row["per_candidate_greedy_estimated"]["cpu_s"]
                / row[arm]["cpu_s"],
                "greedy_estimated": "greedy" not in row,
                "objective_gap_to_greedy": (greedy["objective"] - row[arm]["objective"])
                if "objective" in greedy
                else None,
                "objective_gap_random_to_greedy": (greedy["objective"] - row["random"]["objective"])
                if "objective" in greedy
                else None,
                "share_of_greedy_gain_over_random": (row[arm]["objective"] - row["random"]["objective"])
                / (greedy["objective"] - row["random"]["objective"])
                if "objective" in greedy
                else None,
            }
    out = {
        "benchmark": "datamask_speed",
        "setting": {"ratio": RATIO, "lam": LAM, "embed_dim": 64, "pool": "mixture_pool(seed=0)"},
        "target_speedup_at_1e5": TARGET_SPEEDUP,
        "machine": machine_info(),
        "load_average_at_end": os.getloadavg(),
        "rows": rows,
        "summary": summary,
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"datamask_speed{suffix(args)}.json"
    path.write_text(json.dumps(out, indent=2) + "\n")
    for key, value in summary.items():
        print(key, json.dumps(value))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
