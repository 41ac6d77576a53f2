"""Train a whole zoo at once: every network's parameters stacked on a leading axis, forward passes
vmapped, one Adam over the stack (Adam is elementwise, so this equals independent per-network runs).
The stack is a LightningModule fitted by ``litlab.fitting.Fitter`` like every other model."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from pathlib import Path

import lightning as L
import torch
from torch.utils.data import DataLoader, IterableDataset

from litlab.core.cache import cached_tensors
from litlab.core.results import TaskOutput
from litlab.datamodules.weights import ClassificationData, Zoo, classification_data, load_zoo, save_zoo
from litlab.fitting import Fitter
from litlab.methods.deepweightflow.architectures import (
    build_network,
    init_zoo_params,
    resolve_arch,
    zoo_accuracy,
)
from litlab.methods.deepweightflow.canonical import align_zoo
from litlab.task import TaskContext

log = logging.getLogger("litlab")


class ZooBatches(IterableDataset):
    """Each network's own minibatch order: an epoch draws ``order: (networks, n)`` from one seeded
    generator and yields ``x: (networks, batch, f)``, ``y: (networks, batch)`` (the last partial batch is
    dropped)."""

    def __init__(self, data: ClassificationData, n_networks: int, batch_size: int, seed: int) -> None:
        self.x, self.y = data.x_train, data.y_train
        self.n_networks, self.batch_size = n_networks, batch_size
        self.generator = torch.Generator().manual_seed(seed)

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        n = len(self.y)
        order = torch.rand(self.n_networks, n, generator=self.generator).argsort(1)
        for start in range(0, n - self.batch_size + 1, self.batch_size):
            index = order[:, start : start + self.batch_size]
            yield self.x[index], self.y[index]


class ZooModule(L.LightningModule):
    """A zoo as one model: ``{name: (n, ...)}`` stacked parameters (BatchNorm statistics as buffers),
    logits ``(n, batch, classes)`` by vmap over a template network, loss = Σ_networks mean cross-entropy."""

    def __init__(self, arch: dict, seeds: list[int], lr: float) -> None:
        super().__init__()
        self.arch, self.lr = arch, lr
        template = build_network(arch).train()
        self.template = {"net": template}  # in a dict: its own (unused) parameters stay out of the optimizer
        trainable = {name for name, _ in template.named_parameters()}
        init = init_zoo_params(arch, seeds)
        self.names = sorted(init)
        for name, value in init.items():
            if name in trainable:
                self.register_parameter(self._slot(name), torch.nn.Parameter(value))
            else:
                self.register_buffer(self._slot(name), value)

    @staticmethod
    def _slot(name: str) -> str:
        return name.replace(".", "__")

    def stacked(self) -> dict[str, torch.Tensor]:
        """The stacked state by state-dict name."""
        return {name: getattr(self, self._slot(name)) for name in self.names}

    def on_fit_start(self) -> None:
        self.template["net"].to(self.device)  # its integer buffers (BatchNorm counters) follow the stack

    def training_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> torch.Tensor:
        x, y = batch  # (networks, batch, f), (networks, batch)
        net = self.template["net"]
        logits = torch.vmap(lambda p, xs: torch.func.functional_call(net, p, (xs,)))(self.stacked(), x)
        loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), y.flatten(), reduction="sum") / len(
            y[0]
        )
        self.log("train/loss", loss / len(y))
        return loss

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.Adam(self.parameters(), lr=self.lr)


def train_zoo(
    arch: str | dict,
    dataset: str,
    n_networks: int,
    epochs: int = 40,
    batch_size: int = 32,
    lr: float = 1e-3,
    seed: int = 0,
    fitter: Fitter | None = None,
) -> Zoo:
    """``n_networks`` networks of ``arch`` on ``dataset``; network i uses seed ``seed + i`` for its init
    and its own minibatch order. ``arch`` is a preset name or a dict (see ``architectures``). Returns the
    zoo with each network's test accuracy."""
    arch = resolve_arch(arch)
    data = classification_data(dataset)
    seeds = [seed + i for i in range(n_networks)]
    module = ZooModule(arch, seeds, lr)
    loader = DataLoader(ZooBatches(data, n_networks, batch_size, seed), batch_size=None)
    (fitter or Fitter()).fit(module, loader, max_epochs=epochs)
    params = {k: v.detach().cpu() for k, v in module.stacked().items()}
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
    zoo = train_zoo(arch, dataset, n_networks, epochs, batch_size, lr, seed, ctx.fitter)
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


ZOO_VERSION = "1"  # bump when train_zoo changes what a seeded zoo is


def cached_zoo(
    arch: str | dict,
    dataset: str,
    n_networks: int,
    epochs: int = 40,
    batch_size: int = 32,
    lr: float = 1e-3,
    seed: int = 0,
    fitter: Fitter | None = None,
) -> Zoo:
    """``train_zoo`` with its result cached under ``$LITLAB_CACHE/weights`` (safetensors, keyed by the
    arguments and ``ZOO_VERSION``): the first call trains, later calls read."""
    arch = resolve_arch(arch)
    key = {"arch": arch, "dataset": dataset, "n": n_networks, "epochs": epochs, "batch": batch_size}
    key |= {"lr": lr, "seed": seed}

    def build() -> dict[str, torch.Tensor]:
        zoo = train_zoo(arch, dataset, n_networks, epochs, batch_size, lr, seed, fitter)
        return {"accuracy": zoo.accuracy} | {f"param/{k}": v for k, v in zoo.params.items()}

    tensors = cached_tensors("weights", "zoo", ZOO_VERSION, key, build)
    params = {k.removeprefix("param/"): v for k, v in tensors.items() if k.startswith("param/")}
    return Zoo(params, arch, dataset, [seed + i for i in range(n_networks)], tensors["accuracy"])


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
    """The zoo a generator trains on: ``zoo_dir`` if given, else a seeded ``cached_zoo``. Aligned to member
    0 if ``align`` (the paper's canonicalisation; false is its "without_rebasin" ablation) and not already.
    """
    zoo = (
        load_zoo(zoo_dir)
        if zoo_dir is not None
        else cached_zoo(arch, dataset, n_networks, epochs, batch_size, lr, seed)
    )
    return align_zoo(zoo) if align and not zoo.canonical else zoo
