"""Train a whole zoo at once: every network's parameters stacked on a leading axis, forward passes
vmapped, one Adam over the stack (Adam is elementwise, so this equals independent per-network runs)."""

from __future__ import annotations

import hashlib
import json
import logging
import time
from pathlib import Path

import torch
from rich.progress import track

from litlab.core.paths import cache_dir
from litlab.core.results import TaskOutput
from litlab.datamodules.weights import Zoo, classification_data, load_zoo, save_zoo
from litlab.methods.deepweightflow.architectures import (
    build_network,
    init_zoo_params,
    resolve_arch,
    zoo_accuracy,
)
from litlab.methods.deepweightflow.canonical import align_zoo
from litlab.task import TaskContext

log = logging.getLogger("litlab")


def train_zoo(
    arch: str | dict,
    dataset: str,
    n_networks: int,
    epochs: int = 40,
    batch_size: int = 32,
    lr: float = 1e-3,
    seed: int = 0,
    progress: bool = False,
) -> Zoo:
    """``n_networks`` networks of ``arch`` on ``dataset``; network i uses seed ``seed + i`` for its init
    and its own minibatch order. ``arch`` is a preset name or a dict (see ``architectures``). Returns the
    zoo with each network's test accuracy."""
    arch = resolve_arch(arch)
    data = classification_data(dataset)
    seeds = [seed + i for i in range(n_networks)]
    state = init_zoo_params(arch, seeds)
    net = build_network(arch).train()
    trainable = {name for name, _ in net.named_parameters()}
    params = {k: v.requires_grad_(k in trainable) for k, v in state.items()}
    optimizer = torch.optim.Adam([v for k, v in params.items() if k in trainable], lr=lr)
    generator = torch.Generator().manual_seed(seed)
    n = len(data.y_train)
    steps = range(epochs)
    for _ in track(steps, description="zoo epochs") if progress else steps:
        order = torch.rand(n_networks, n, generator=generator).argsort(1)  # (networks, n)
        for start in range(0, n - batch_size + 1, batch_size):
            index = order[:, start : start + batch_size]
            x, y = data.x_train[index], data.y_train[index]  # (networks, batch, f), (networks, batch)
            logits = torch.vmap(lambda p, xs: torch.func.functional_call(net, p, (xs,)))(params, x)
            loss = (
                torch.nn.functional.cross_entropy(logits.flatten(0, 1), y.flatten(), reduction="sum")
                / batch_size
            )
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
    params = {k: v.detach() for k, v in params.items()}
    accuracy = zoo_accuracy(arch, params, data.x_test, data.y_test)
    return Zoo(params, dict(arch), dataset, seeds, accuracy)


def zoo_task(
    ctx: TaskContext,
    arch: str | dict,
    dataset: str,
    n_networks: int,
    epochs: int = 40,
    batch_size: int = 32,
    lr: float = 1e-3,
    seed: int = 0,
) -> TaskOutput:
    """Stage 1: train a zoo and write it to ``<output_dir>/zoo`` (safetensors + index.json)."""
    output_dir = ctx.output_dir
    start = time.perf_counter()
    zoo = train_zoo(arch, dataset, n_networks, epochs, batch_size, lr, seed, progress=True)
    seconds = time.perf_counter() - start
    folder = save_zoo(zoo, Path(output_dir) / "zoo")
    results = {
        "acc_mean": float(zoo.accuracy.mean()),
        "acc_std": float(zoo.accuracy.std()),
        "acc_min": float(zoo.accuracy.min()),
        "seconds": seconds,
        "networks_per_minute": 60 * n_networks / seconds,
    }
    log.info("zoo of %d networks in %s: %s", n_networks, folder, results)
    return {"metrics": results}


def zoo_source(
    arch: str | dict,
    dataset: str,
    n_networks: int,
    epochs: int = 40,
    batch_size: int = 32,
    lr: float = 1e-3,
    seed: int = 0,
    zoo_dir: str | None = None,
    align: bool = True,
) -> Zoo:
    """The zoo a generator trains on: ``zoo_dir`` if given, else a seeded zoo cached under
    ``$LITLAB_CACHE/weights`` (built on first use). Aligned to member 0 if ``align`` and not already."""
    if zoo_dir is not None:
        zoo = load_zoo(zoo_dir)
    else:
        key = json.dumps(
            [resolve_arch(arch), dataset, n_networks, epochs, batch_size, lr, seed], sort_keys=True
        )
        folder = cache_dir("weights") / f"zoo_{hashlib.sha1(key.encode()).hexdigest()[:12]}"
        try:
            zoo = load_zoo(folder)
        except Exception:  # absent or half-written cache: rebuild it
            zoo = train_zoo(arch, dataset, n_networks, epochs, batch_size, lr, seed)
            save_zoo(zoo, folder)
    return align_zoo(zoo) if align and not zoo.canonical else zoo
