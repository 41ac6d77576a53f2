"""Epoch time of each base spectral GNN with AdaSpec's Ω against its own matrix (target: at most 1.3×).

One epoch is what the training loop does: a full-batch training step (forward, backward, Adam) and an
evaluation forward. Models are the packaged configs (``model=spectral_gnn_<base>`` and ``adaspec_<base>``);
a base and its AdaSpec variant alternate within every repeat, so a load change on a shared machine hits
both alike; the reported time is the median over repeats of the mean over ``--epochs`` epochs (a tenth
of that, at least 2, on graphs with over 100k edges).

Run:  python benchmarks/adaspec_epoch_time.py [--quick] [--threads 1] [--datasets texas,citeseer,tolokers]
Writes benchmarks/results/adaspec_epoch_time.json (``--quick``: adaspec_epoch_time_quick.json).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import hydra
import torch
from hydra import compose, initialize_config_module

from litlab.core.machine import cpu_model
from litlab.datamodules.graphs import graph_set, load_node_graph
from litlab.methods.adaspec.module import NodeClassifier
from litlab.methods.adaspec.training import train_step
from litlab.runner.resolvers import register_hydra_extensions

register_hydra_extensions()

RESULTS = Path(__file__).resolve().parent / "results"
BASES = ("chebnet", "chebnetii", "gprgnn", "bernnet", "jacobiconv")
TARGET_RATIO = 1.3


def model_configs(base: str) -> dict:
    """The base's and its AdaSpec variant's model configs, as packaged."""
    configs = {}
    with initialize_config_module(config_module="litlab.configs", version_base="1.3"):
        for variant, name in (("base", f"spectral_gnn_{base}"), ("adaspec", f"adaspec_{base}")):
            configs[variant] = compose("train", overrides=["experiment=adaspec/texas", f"model={name}"]).model
    return configs


def epoch_timer(module: NodeClassifier, graph, metric: str):
    """A closure running one training epoch (step + evaluation forward) of ``module`` on ``graph``."""
    torch.manual_seed(0)
    module.build(graph, metric)
    optimizer = module.configure_optimizers()

    def epoch() -> None:
        train_step(module, optimizer, graph)
        module.eval()
        with torch.no_grad():
            module.loss_and_score(module(graph.x), graph, graph.val_mask)

    return epoch


def time_epochs(epoch, epochs: int) -> tuple[float, float]:
    """Mean wall and thread-CPU seconds per epoch over ``epochs`` epochs."""
    wall, cpu = time.perf_counter(), time.thread_time()
    for _ in range(epochs):
        epoch()
    return (time.perf_counter() - wall) / epochs, (time.thread_time() - cpu) / epochs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="Texas only, fewer repeats")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--datasets", default="texas,citeseer,tolokers")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--epochs", type=int, default=20)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    datasets = ["texas"] if args.quick else args.datasets.split(",")
    repeats = 3 if args.quick else args.repeats
    rows = []
    for dataset in datasets:
        split = "fixed" if "fixed" in graph_set(dataset).file_splits else "random"
        graph = load_node_graph(dataset, split=split, seed=0)
        metric = "roc_auc" if graph_set(dataset).binary else "accuracy"
        for base in BASES:
            configs = model_configs(base)
            epochs = {v: epoch_timer(hydra.utils.instantiate(c), graph, metric) for v, c in configs.items()}
            per_repeat = args.epochs if graph.edge_index.size(1) <= 100_000 else max(2, args.epochs // 10)
            for epoch in epochs.values():  # warm-up
                time_epochs(epoch, 2)
            samples: dict[str, list[tuple[float, float]]] = {v: [] for v in epochs}
            for _ in range(repeats):
                for variant, epoch in epochs.items():
                    samples[variant].append(time_epochs(epoch, per_repeat))
            row = {
                "dataset": dataset,
                "base": base,
                "nodes": graph.num_nodes,
                "edges": graph.edge_index.size(1),
            }
            for variant, values in samples.items():
                row[f"{variant}_ms"] = 1000 * statistics.median(v[0] for v in values)
                row[f"{variant}_cpu_ms"] = 1000 * statistics.median(v[1] for v in values)
            row["ratio"] = row["adaspec_ms"] / row["base_ms"]
            row["cpu_ratio"] = row["adaspec_cpu_ms"] / row["base_cpu_ms"]
            rows.append(row)
            print(
                f"{dataset:10s} {base:11s} base {row['base_ms']:8.2f} ms  adaspec {row['adaspec_ms']:8.2f} ms"
                f"  ratio {row['ratio']:.2f} (cpu {row['cpu_ratio']:.2f})",
                flush=True,
            )
    result = {
        "benchmark": "AdaSpec epoch time against the base's own matrix",
        "target_ratio": TARGET_RATIO,
        "within_target": all(r["cpu_ratio"] <= TARGET_RATIO for r in rows),
        "max_cpu_ratio": max(r["cpu_ratio"] for r in rows),
        "settings": {
            "threads": args.threads,
            "repeats": repeats,
            "epochs_per_repeat": f"{args.epochs} (a tenth, at least 2, above 100k edges)",
            "torch": torch.__version__,
            "cpu": cpu_model(),
            "epoch": "training step (forward, backward, Adam) + evaluation forward, full batch",
        },
        "rows": rows,
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / ("adaspec_epoch_time_quick.json" if args.quick else "adaspec_epoch_time.json")
    path.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
