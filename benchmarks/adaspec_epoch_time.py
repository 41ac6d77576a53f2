"""Epoch time of each base spectral GNN with AdaSpec's Ω against its own matrix (target: at most 1.3×), and
of our ChebNet against the peer, torch_geometric's ChebConv, in the same run.

One epoch is what the study does through ``litlab.fitting.Fitter``: a full-batch training step (forward,
backward, Adam) and a validation forward that also scores the test mask. Models are the packaged configs
(``model=adaspec/<base>`` and ``model=adaspec/<base>_adaspec``); a base and its AdaSpec variant alternate
within every repeat, so a load change on a shared machine hits both alike; the reported time is the median
over repeats of the mean over ``--epochs`` epochs (a tenth of that, at least 2, on graphs with over 100k
edges). The peer rows time a plain loop (step + evaluation forward) of two ``ChebConv(K=2)`` layers against
our ``ChebNet(K=1)`` backbone on its native matrix: the same model (tests/methods/adaspec/test_bases.py), so
the ratio is the cost of the implementation (PyG gets dense features, ours the sparse ones it uses).

Run:  python benchmarks/adaspec_epoch_time.py [--quick] [--threads 1] [--datasets texas,citeseer,tolokers]
Writes benchmarks/results/adaspec_epoch_time.json (``--quick``: adaspec_epoch_time_quick.json).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import hydra
import torch
from hydra import compose, initialize_config_module
from torch.nn import functional as F
from torch_geometric.nn import ChebConv

from litlab.core.machine import machine_info
from litlab.datamodules.graphs import graph_set, load_node_graph, node_data_spec
from litlab.fitting import Fitter
from litlab.methods.adaspec.bases import ChebNet
from litlab.methods.adaspec.matrix import NativeMatrix
from litlab.runner.resolvers import register_hydra_extensions

register_hydra_extensions()

RESULTS = Path(__file__).resolve().parent / "results"
BASES = ("chebnet", "chebnetii", "gprgnn", "bernnet", "jacobiconv")
TARGET_RATIO = 1.3
Epochs = Callable[[int], None]


def model_configs(base: str) -> dict:
    """The base's and its AdaSpec variant's model configs, as packaged."""
    configs = {}
    with initialize_config_module(config_module="litlab.configs", version_base="1.3"):
        for variant, name in (("base", base), ("adaspec", f"{base}_adaspec")):
            overrides = ["experiment=adaspec/texas", f"model=adaspec/{name}"]
            configs[variant] = compose("train", overrides=overrides).model
    return configs


def fitter_epochs(config, graph, metric: str, fitter: Fitter) -> Epochs:
    """``run(n)``: n study epochs (Fitter step + validation with test scores) of a fresh bound module."""
    module = hydra.utils.instantiate(config)
    torch.manual_seed(0)
    module.bind_data(node_data_spec(graph, metric))
    module.test_in_validation = True

    def run(epochs: int) -> None:
        fitter.fit(module, [graph], [graph], max_epochs=epochs, val_every_n_steps=1)

    return run


class PygChebNet(torch.nn.Module):
    """The peer: two ``torch_geometric.nn.ChebConv(K=2)`` layers with ReLU and dropout between them."""

    def __init__(self, in_channels: int, out_channels: int, hidden: int = 64, dropout: float = 0.5) -> None:
        super().__init__()
        self.conv1 = ChebConv(in_channels, hidden, K=2)
        self.conv2 = ChebConv(hidden, out_channels, K=2)
        self.dropout = dropout

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        x = F.dropout(x, self.dropout, self.training)
        x = F.dropout(F.relu(self.conv1(x, edge_index, lambda_max=2.0)), self.dropout, self.training)
        return self.conv2(x, edge_index, lambda_max=2.0)


def plain_epochs(forward: Callable[[], torch.Tensor], model: torch.nn.Module, graph) -> Epochs:
    """``run(n)``: n plain epochs (Adam step on the training mask, then an evaluation forward)."""
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01, weight_decay=5e-4)

    def run(epochs: int) -> None:
        for _ in range(epochs):
            model.train()
            optimizer.zero_grad(set_to_none=True)
            F.cross_entropy(forward()[graph.train_mask], graph.y[graph.train_mask]).backward()
            optimizer.step()
            model.eval()
            with torch.no_grad():
                forward()

    return run


def peer_epochs(graph) -> dict[str, Epochs]:
    """Our ChebNet backbone on its native matrix and the PyG peer, as plain epoch loops."""
    torch.manual_seed(0)
    classes = int(graph.y.max()) + 1
    ours = ChebNet(graph.x.size(1), classes)
    matrix = NativeMatrix(graph.edge_index, graph.num_nodes, self_loops=False)
    dense = graph.x.to_dense() if graph.x.is_sparse else graph.x
    peer = PygChebNet(graph.x.size(1), classes)
    return {
        "ours": plain_epochs(lambda: ours(graph.x, matrix()), ours, graph),
        "pyg": plain_epochs(lambda: peer(dense, graph.edge_index), peer, graph),
    }


def time_epochs(run: Epochs, epochs: int) -> tuple[float, float]:
    """Mean wall and thread-CPU seconds per epoch over ``epochs`` epochs."""
    wall, cpu = time.perf_counter(), time.thread_time()
    run(epochs)
    return (time.perf_counter() - wall) / epochs, (time.thread_time() - cpu) / epochs


def compare(runs: dict[str, Epochs], repeats: int, epochs: int) -> dict[str, float]:
    """Median per-epoch wall and CPU milliseconds of each variant, variants alternating within repeats."""
    for run in runs.values():  # warm-up
        time_epochs(run, 2)
    samples: dict[str, list[tuple[float, float]]] = {name: [] for name in runs}
    for _ in range(repeats):
        for name, run in runs.items():
            samples[name].append(time_epochs(run, epochs))
    row = {}
    for name, values in samples.items():
        row[f"{name}_ms"] = 1000 * statistics.median(v[0] for v in values)
        row[f"{name}_cpu_ms"] = 1000 * statistics.median(v[1] for v in values)
    return row


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
    fitter = Fitter()
    rows, peer_rows = [], []
    for dataset in datasets:
        spec = graph_set(dataset)
        graph = load_node_graph(dataset, split="fixed" if "fixed" in spec.file_splits else "random", seed=0)
        size = {"dataset": dataset, "nodes": graph.num_nodes, "edges": graph.edge_index.size(1)}
        per_repeat = args.epochs if graph.edge_index.size(1) <= 100_000 else max(2, args.epochs // 10)
        for base in BASES:
            runs = {v: fitter_epochs(c, graph, spec.metric, fitter) for v, c in model_configs(base).items()}
            row = {**size, "base": base, **compare(runs, repeats, per_repeat)}
            row["ratio"] = row["adaspec_ms"] / row["base_ms"]
            row["cpu_ratio"] = row["adaspec_cpu_ms"] / row["base_cpu_ms"]
            rows.append(row)
            print(
                f"{dataset:10s} {base:11s} base {row['base_ms']:8.2f} ms  adaspec {row['adaspec_ms']:8.2f} ms"
                f"  ratio {row['ratio']:.2f} (cpu {row['cpu_ratio']:.2f})",
                flush=True,
            )
        peer = {**size, **compare(peer_epochs(graph), repeats, per_repeat)}
        peer["pyg_over_ours_cpu"] = peer["pyg_cpu_ms"] / peer["ours_cpu_ms"]
        peer_rows.append(peer)
        print(
            f"{dataset:10s} ChebNet ours {peer['ours_cpu_ms']:8.2f} cpu-ms  PyG ChebConv "
            f"{peer['pyg_cpu_ms']:8.2f} cpu-ms  (PyG/ours {peer['pyg_over_ours_cpu']:.2f})",
            flush=True,
        )
    result = {
        "benchmark": "AdaSpec epoch time against the base's own matrix; our ChebNet against PyG ChebConv",
        "target_ratio": TARGET_RATIO,
        "within_target": all(r["cpu_ratio"] <= TARGET_RATIO for r in rows),
        "max_cpu_ratio": max(r["cpu_ratio"] for r in rows),
        "settings": {
            "threads": args.threads,
            "repeats": repeats,
            "epochs_per_repeat": f"{args.epochs} (a tenth, at least 2, above 100k edges)",
            "epoch": "Fitter step (forward, backward, Adam) + validation forward scoring val and test",
            "peer_epoch": "plain loop: Adam step on the training mask + evaluation forward",
            "load_average_1min": os.getloadavg()[0],
            **machine_info(),
        },
        "rows": rows,
        "peer_rows": peer_rows,
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / ("adaspec_epoch_time_quick.json" if args.quick else "adaspec_epoch_time.json")
    path.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
