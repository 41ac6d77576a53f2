"""One way to fit models inside tasks and studies: a lean loop on Lightning Fabric.

``litlab-train`` runs one model through Lightning's Trainer (run folder, checkpoints, loggers). Tasks and
studies fit many models (seeds × arms × cases); they all go through :class:`Fitter`, which takes the
accelerator, devices, nodes, strategy and precision of the run's ``trainer=`` config (and so its
``resources``), seeds every fit, and calls the LightningModule's own ``training_step``,
``validation_step`` and ``configure_optimizers``. Its per-step cost is that of a hand-written loop
(``benchmarks/trainer_overhead.py``), which matters when a study fits thousands of tiny full-batch models.

Hooks called on the module: ``on_fit_start``, ``on_train_start``, ``on_train_epoch_start``,
``on_after_backward``, ``on_train_batch_end``, ``on_train_epoch_end``, ``on_validation_epoch_start``,
``on_validation_epoch_end``, ``on_train_end``, ``on_fit_end`` (and, with a checkpoint file,
``on_save_checkpoint`` / ``on_load_checkpoint``). Values passed to ``self.log`` are
collected: training values averaged since the last validation, validation values averaged over the
validation batches (and over ranks). A fit given a ``checkpoint`` file saves its whole state there after
every validation and, started again with the file present, continues where it was saved.
"""

from __future__ import annotations

import copy
import math
import os
import pickle
import random
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import lightning as L
import numpy as np
import torch
from lightning.fabric.loggers import Logger as FabricLogger

from litlab.core.errors import LitlabError
from litlab.core.machine import skip_gpu_probe_on_cpu_machines
from litlab.core.progress import track

# Trainer keys the Fitter takes from a ``trainer=`` config; the loop keys (max_epochs, callbacks ...) are
# the task's to choose.
FABRIC_KEYS = ("accelerator", "devices", "num_nodes", "strategy", "precision")


@dataclass
class FitResult:
    """What one fit did: its length, the metric history, and the metrics at the end (or at the best)."""

    steps: int
    epochs: int
    seconds: float
    metrics: dict[str, float]
    history: list[dict[str, float]] = field(default_factory=list)
    best_step: int | None = None
    stopped_early: bool = False


class _MetricCollector(FabricLogger):
    """Collects ``self.log`` values as running means per key (what the loop reads back)."""

    def __init__(self) -> None:
        super().__init__()
        self._sums: dict[str, float] = {}
        self._counts: dict[str, int] = {}

    @property
    def name(self) -> str:
        return "litlab_fitter"

    @property
    def version(self) -> int:
        return 0

    def log_hyperparams(self, params: Any, *args: Any, **kwargs: Any) -> None:
        """Hyperparameters are the run's business, not a fit's."""

    def log_metrics(self, metrics: Mapping[str, Any], step: int | None = None) -> None:
        """Add ``metrics`` to the running sums, on every rank (the loop averages them over ranks)."""
        for key, value in metrics.items():
            number = float(value.detach().float().mean()) if isinstance(value, torch.Tensor) else float(value)
            self._sums[key] = self._sums.get(key, 0.0) + number
            self._counts[key] = self._counts.get(key, 0) + 1

    def state(self) -> tuple[dict[str, float], dict[str, int]]:
        """The running sums and counts (what a checkpoint between two validations must keep)."""
        return dict(self._sums), dict(self._counts)

    def restore(self, state: tuple[dict[str, float], dict[str, int]]) -> None:
        """Set the running sums and counts to what :meth:`state` returned."""
        self._sums, self._counts = dict(state[0]), dict(state[1])

    def take(self) -> dict[str, float]:
        """The means since the last ``take`` (and reset)."""
        means = {key: self._sums[key] / self._counts[key] for key in self._sums}
        self._sums, self._counts = {}, {}
        return means


def _as_loss(output: Any) -> torch.Tensor:
    """The loss from what ``training_step`` returned (a tensor or a dict with ``loss``)."""
    if isinstance(output, Mapping):
        output = output.get("loss")
    if not isinstance(output, torch.Tensor):
        raise LitlabError(
            f"training_step must return the loss tensor or a dict with 'loss', got {type(output).__name__}"
        )
    return output


def _split_optimizers(configured: Any) -> tuple[torch.optim.Optimizer, Any, str]:
    """(optimizer, scheduler or None, scheduler interval) from ``configure_optimizers``' return value."""
    if isinstance(configured, torch.optim.Optimizer):
        return configured, None, "epoch"
    if isinstance(configured, Mapping) and isinstance(configured.get("optimizer"), torch.optim.Optimizer):
        scheduler = configured.get("lr_scheduler")
        interval = "epoch"
        if isinstance(scheduler, Mapping):
            interval = scheduler.get("interval", "epoch")
            scheduler = scheduler["scheduler"]
        return configured["optimizer"], scheduler, interval
    raise LitlabError(
        "the Fitter supports one optimizer (configure_optimizers returning it, or a dict with 'optimizer' "
        f"and an optional 'lr_scheduler'); got {type(configured).__name__}"
    )


class Fitter:
    """Fits LightningModules on the devices of the run's ``trainer=`` config, one seeded fit at a time.

    Args:
        accelerator, devices, num_nodes, strategy, precision: as for Lightning (``Fitter.from_config``
            takes them from a ``trainer`` config, so ``trainer=gpu resources.devices=4`` reaches tasks).
        gradient_clip_val: clip the gradient norm to this value (None: no clipping).
    """

    def __init__(
        self,
        accelerator: str = "cpu",
        devices: int | str | list[int] = 1,
        num_nodes: int = 1,
        strategy: Any = "auto",
        precision: str | int = "32-true",
        gradient_clip_val: float | None = None,
    ) -> None:
        self.settings = {
            "accelerator": accelerator,
            "devices": devices,
            "num_nodes": num_nodes,
            "strategy": _fabric_strategy(strategy),
            "precision": precision,
        }
        self.gradient_clip_val = gradient_clip_val
        self._fabric: L.Fabric | None = None

    @classmethod
    def from_config(cls, trainer: Mapping[str, Any] | None) -> Fitter:
        """A Fitter with the device settings of a ``trainer`` config (a DictConfig or a dict)."""
        trainer = dict(trainer or {})
        kwargs = {key: trainer[key] for key in FABRIC_KEYS if trainer.get(key) is not None}
        if trainer.get("gradient_clip_val") is not None:
            kwargs["gradient_clip_val"] = trainer["gradient_clip_val"]
        return cls(**kwargs)

    @property
    def fabric(self) -> L.Fabric:
        """The Fabric of this Fitter, launched (processes started) on first use."""
        if self._fabric is None:
            skip_gpu_probe_on_cpu_machines()
            fabric = L.Fabric(**self.settings, loggers=[_MetricCollector()])
            fabric.launch()
            self._fabric = fabric
        return self._fabric

    @property
    def is_global_zero(self) -> bool:
        """True in the process that writes results (rank 0)."""
        return self.fabric.is_global_zero

    def fit(
        self,
        module: L.LightningModule,
        train: Iterable | L.LightningDataModule,
        val: Iterable | None = None,
        *,
        max_steps: int | None = None,
        max_epochs: int | None = None,
        val_every_n_steps: int | None = None,
        monitor: str | None = None,
        mode: str = "min",
        patience: int | None = None,
        min_steps: int = 0,
        restore_best: bool = False,
        seed: int | None = None,
        progress: str | None = None,
        checkpoint: str | Path | None = None,
        checkpoint_every_s: float = 600.0,
    ) -> FitResult:
        """Train ``module`` on ``train`` (a DataLoader/iterable or a DataModule) and return what happened.

        Stops after ``max_steps`` optimizer steps or ``max_epochs`` passes (at least one must be given).
        Validation (on ``val``, or the DataModule's ``val_dataloader``) runs every ``val_every_n_steps``
        steps, else at each epoch end. With ``monitor`` (a validation key) the best value is tracked,
        ``patience`` validations without improvement stop the fit (never before ``min_steps`` steps, so an
        early transient rise of the monitored value cannot end it), and ``restore_best`` loads the best
        weights back; ``FitResult.metrics`` then are the metrics of the best validation. ``progress``, a
        description (with ``max_steps``), reports the steps done: a terminal bar, else a log line per 10 %.
        ``checkpoint``, a file: the fit's state (weights, optimizer, scheduler, step, early-stopping state,
        random number generators, the loader's place in its epoch, and what the module's
        ``on_save_checkpoint`` adds) is written there atomically after every validation and, between
        validations in one process, after the first step ``checkpoint_every_s`` seconds after the last save;
        when the file
        exists the fit continues from it (``on_load_checkpoint`` is called), drawing in one process the same
        batches and noise as a fit never stopped. A larger ``max_steps`` or ``patience`` than the saved fit's
        extends it. The caller deletes the file once the fit's result is kept.
        """
        if max_steps is None and max_epochs is None:
            raise LitlabError("Fitter.fit needs max_steps or max_epochs")
        if progress is not None and max_steps is None:
            raise LitlabError("Fitter.fit reports progress against max_steps; give max_steps")
        if mode not in ("min", "max"):
            raise LitlabError(f"mode must be 'min' or 'max', got {mode!r}")
        fabric = self.fabric
        if seed is not None:
            L.seed_everything(seed, workers=True, verbose=False)
        train_loader, val_loader = self._loaders(module, train, val)
        generators = _loader_generators(train_loader)
        configured = module.configure_optimizers()
        optimizer, scheduler, interval = _split_optimizers(configured)
        model, optimizer = fabric.setup(module, optimizer)
        train_loader = fabric.setup_dataloaders(train_loader) if _is_loader(train_loader) else train_loader
        if val_loader is not None and _is_loader(val_loader):
            val_loader = fabric.setup_dataloaders(val_loader)
        collector = fabric.logger
        collector.take()

        loop = _Loop(fabric, model, module, optimizer, scheduler, interval, collector, self.gradient_clip_val)
        if checkpoint is not None:
            loop.keep_state_in(Path(checkpoint), generators, checkpoint_every_s)
        reported = progress is not None and fabric.is_global_zero
        if reported and loop.step:
            progress = f"{progress} (continued from step {loop.step})"
        steps_done = track(range(loop.step, max_steps), progress, done=loop.step) if reported else None
        if steps_done is not None:
            loop.on_step = lambda: next(steps_done, None)
            loop.on_step()  # the bar, or the first log line, before the first step
        try:
            result = loop.run(
                train_loader,
                val_loader,
                max_steps=max_steps if max_steps is not None else math.inf,
                max_epochs=max_epochs if max_epochs is not None else math.inf,
                val_every=val_every_n_steps,
                monitor=monitor,
                sign=1.0 if mode == "min" else -1.0,
                patience=patience,
                min_steps=min_steps,
                restore_best=restore_best,
            )
        finally:
            if steps_done is not None:
                steps_done.close()  # an early stop or an error closes the bar
        return result

    @torch.no_grad()
    def evaluate(self, module: L.LightningModule, loader: Iterable, stage: str = "test") -> dict[str, float]:
        """Run ``<stage>_step`` over ``loader`` and return the means of what it logged."""
        fabric = self.fabric
        model = module if isinstance(module, torch.nn.Module) and hasattr(module, "_forward_module") else None
        model = model or fabric.setup_module(module)
        loader = fabric.setup_dataloaders(loader) if _is_loader(loader) else loader
        collector = fabric.logger
        collector.take()
        model.eval()
        for index, batch in enumerate(loader):
            getattr(model, f"{stage}_step")(batch, index)
        return _reduced(fabric, collector.take())

    def _loaders(self, module: L.LightningModule, train: Any, val: Any) -> tuple[Iterable, Iterable | None]:
        if not isinstance(train, L.LightningDataModule):
            return train, val
        datamodule = train
        with self.fabric.rank_zero_first():
            datamodule.prepare_data()
        datamodule.setup("fit")
        if val is None and type(datamodule).val_dataloader is not L.LightningDataModule.val_dataloader:
            val = datamodule.val_dataloader()
        return datamodule.train_dataloader(), val


class _Loop:
    """The training loop of one fit (state that lives only as long as the fit, or in its checkpoint)."""

    def __init__(
        self,
        fabric: L.Fabric,
        model: torch.nn.Module,
        module: L.LightningModule,
        optimizer: Any,
        scheduler: Any,
        interval: str,
        collector: _MetricCollector,
        clip: float | None,
    ) -> None:
        self.fabric, self.model, self.module = fabric, model, module
        self.optimizer, self.scheduler, self.interval = optimizer, scheduler, interval
        self.collector, self.clip = collector, clip
        self.on_step: Callable[[], object] | None = None  # called after every optimizer step
        self.checkpoint: Path | None = None
        self.generators: list[torch.Generator] = []
        self.resumed = False
        self.resume_rng: dict[str, Any] = {}  # generator states when the checkpoint was written
        self.started = 0.0  # perf_counter when this leg of the fit began
        self.save_every_s = math.inf  # between validations, save when the last save is this old
        self.saved_at = 0.0  # monotonic time of the last save (or of this leg's start)
        # The state a checkpoint holds besides weights, optimizer and generators (``_LOOP_KEYS``).
        self.step = self.epoch = self.batches_done = 0  # batches_done: of the current epoch
        self.seconds = 0.0  # spent by earlier legs of the fit
        self.history: list[dict[str, float]] = []
        self.best_value = math.inf
        self.best_step: int | None = None
        self.best_state: dict[str, torch.Tensor] | None = None
        self.best_metrics: dict[str, float] = {}
        self.since_best = 0
        self.epoch_rng: dict[str, Any] = {}  # generator states as the current epoch began

    def keep_state_in(self, path: Path, generators: list[torch.Generator], every_s: float) -> None:
        """Save the fit's state to ``path`` after every validation and at least every ``every_s`` seconds
        of training (in one process: ranks would not agree on the time, and a save is collective); continue
        from it if it exists."""
        self.checkpoint, self.generators = path, generators
        self.save_every_s = every_s if self.fabric.world_size == 1 else math.inf
        if not path.exists():
            return
        try:
            objects = {"model": self.model, "optimizer": self.optimizer}
            saved = self.fabric.load(path, objects, weights_only=True)
            if self.scheduler is not None:
                self.scheduler.load_state_dict(saved["scheduler"])
            for key in _LOOP_KEYS:
                setattr(self, key, saved["loop"][key])
            self.resume_rng = saved["rng"]
            self.collector.restore(saved["collector"])
            self.module.on_load_checkpoint(saved)
        except (RuntimeError, KeyError, EOFError, OSError, pickle.UnpicklingError) as error:
            reason = " ".join(str(error).split())[:300]
            if isinstance(error, KeyError):
                reason = f"it has no {reason} (written by another version of litlab?)"
            raise LitlabError(
                f"cannot continue the fit saved in {path}: {reason}; delete the file to start the fit afresh"
            ) from error
        self.resumed = True

    def run(
        self,
        train_loader: Iterable,
        val_loader: Iterable | None,
        *,
        max_steps: float,
        max_epochs: float,
        val_every: int | None,
        monitor: str | None,
        sign: float,
        patience: int | None,
        min_steps: int,
        restore_best: bool,
    ) -> FitResult:
        module, model = self.module, self.model
        self.started = time.perf_counter()
        self.saved_at = time.monotonic()
        module.on_fit_start()
        module.on_train_start()
        early = self.resumed and self._out_of_patience(patience, min_steps)
        stop = early or self.step >= max_steps or self.epoch >= max_epochs  # a zero budget trains nothing
        last: dict[str, float] = self.history[-1] if self.history else {}
        if self.resumed and hasattr(train_loader, "_num_iter_calls"):
            train_loader._num_iter_calls = self.epoch  # Fabric calls the sampler's set_epoch with this count
        while not stop and self.epoch < max_epochs:
            module.on_train_epoch_start()
            for index, batch in self._batches(train_loader):
                model.train()
                output = model.training_step(batch, index)
                loss = _as_loss(output)
                self.optimizer.zero_grad(set_to_none=True)
                self.fabric.backward(loss)
                module.on_after_backward()
                if self.clip is not None:
                    self.fabric.clip_gradients(model, self.optimizer, max_norm=self.clip)
                self.optimizer.step()
                self.step += 1
                self.batches_done = index + 1
                if self.on_step is not None:
                    self.on_step()
                module.on_train_batch_end(output, batch, index)
                if self.scheduler is not None and self.interval == "step":
                    self.scheduler.step()
                if val_every is not None and self.step % val_every == 0:
                    last = self._validate(val_loader, monitor, sign, restore_best)
                    early = self._out_of_patience(patience, min_steps)
                if early or self.step >= max_steps:
                    stop = True
                    break
                if self.checkpoint is not None and time.monotonic() - self.saved_at >= self.save_every_s:
                    self._save()
            module.on_train_epoch_end()
            self.epoch += 1
            self.batches_done = 0
            if self.scheduler is not None and self.interval == "epoch":
                self.scheduler.step()
            if not stop and val_every is None:
                last = self._validate(val_loader, monitor, sign, restore_best)
                early = self._out_of_patience(patience, min_steps)
                stop = early
        if not self.history or self.history[-1]["step"] != self.step:
            train_metrics = _reduced(self.fabric, self.collector.take())
            if train_metrics:
                last = {**train_metrics, "step": float(self.step), "epoch": float(self.epoch - 1)}
                self.history.append(last)
        module.on_train_end()
        module.on_fit_end()
        metrics = last
        if monitor is not None and self.best_step is not None:
            metrics = self.best_metrics
            if restore_best and self.best_state is not None:
                module.load_state_dict(self.best_state)
        return FitResult(
            steps=self.step,
            epochs=self.epoch,
            seconds=self._seconds(),
            metrics={k: v for k, v in metrics.items() if k not in ("step", "epoch")},
            history=self.history,
            best_step=self.best_step,
            stopped_early=early,
        )

    def _batches(self, train_loader: Iterable) -> Iterable[tuple[int, Any]]:
        """(index, batch) of the current epoch; a fit resumed inside an epoch first draws that epoch's
        shuffle again and skips the batches it had done."""
        if self.checkpoint is None:
            return enumerate(train_loader)
        if self.resumed:
            self.resumed = False
            if self.batches_done:
                _set_rng_states(self.epoch_rng, self.generators)  # the shuffle this epoch drew when it began
                batches = iter(train_loader)
                for _ in range(self.batches_done):
                    next(batches, None)
                _set_rng_states(self.resume_rng, self.generators)
                return enumerate(batches, start=self.batches_done)
            _set_rng_states(self.resume_rng, self.generators)  # saved at an epoch's end: a new epoch begins
        self.epoch_rng = _rng_states(self.generators)
        return enumerate(train_loader)

    def _out_of_patience(self, patience: int | None, min_steps: int) -> bool:
        """True when ``patience`` validations passed without a new best and ``min_steps`` steps are done."""
        return patience is not None and self.since_best >= patience and self.step >= min_steps

    @torch.no_grad()
    def _validate(
        self, val_loader: Iterable | None, monitor: str | None, sign: float, restore_best: bool
    ) -> dict[str, float]:
        """Validate, track the best, and save the fit's state when it has a checkpoint file."""
        epoch = self.epoch if self.batches_done else self.epoch - 1  # the epoch the last step belongs to
        row = {"step": float(self.step), "epoch": float(epoch)}
        row.update(_reduced(self.fabric, self.collector.take()))
        if val_loader is not None:
            self.model.eval()
            self.module.on_validation_epoch_start()
            for index, batch in enumerate(val_loader):
                self.model.validation_step(batch, index)
            self.module.on_validation_epoch_end()
            row.update(_reduced(self.fabric, self.collector.take()))
        self.history.append(row)
        if monitor is not None:
            if monitor not in row:
                logged = ", ".join(sorted(k for k in row if k not in ("step", "epoch"))) or "none"
                raise LitlabError(f"monitor={monitor!r} was not logged; logged: {logged}")
            value = sign * row[monitor]
            if value < self.best_value:
                self.best_value, self.best_step, self.best_metrics = value, self.step, dict(row)
                self.since_best = 0
                if restore_best:
                    self.best_state = copy.deepcopy(self.module.state_dict())
            else:
                self.since_best += 1
        if self.checkpoint is not None:
            self._save()
        return row

    def _seconds(self) -> float:
        """Seconds the fit has trained, over all its legs."""
        return self.seconds + time.perf_counter() - self.started

    def _save(self) -> None:
        """Write the fit's state to its checkpoint file atomically (a temporary file, then a rename)."""
        assert self.checkpoint is not None
        state: dict[str, Any] = {"model": self.model, "optimizer": self.optimizer}
        state["loop"] = {key: getattr(self, key) for key in _LOOP_KEYS} | {"seconds": self._seconds()}
        state["rng"] = _rng_states(self.generators)
        state["collector"] = self.collector.state()
        if self.scheduler is not None:
            state["scheduler"] = self.scheduler.state_dict()
        self.module.on_save_checkpoint(state)  # what the module keeps outside its state_dict, as in Lightning
        partial = self.checkpoint.with_name(self.checkpoint.name + ".partial")
        self.fabric.save(partial, state)
        self.fabric.barrier()
        if self.fabric.is_global_zero:
            os.replace(partial, self.checkpoint)
        self.saved_at = time.monotonic()


# The loop's own state in a checkpoint (with the weights, the optimizer and the generators' states).
_LOOP_KEYS = (
    "step",
    "epoch",
    "batches_done",
    "seconds",
    "history",
    "best_value",
    "best_step",
    "best_state",
    "best_metrics",
    "since_best",
    "epoch_rng",
)


def _loader_generators(loader: Any) -> list[torch.Generator]:
    """The torch generators a DataLoader draws its shuffle from (its own and its samplers'), once each."""
    owners = [loader, getattr(loader, "sampler", None), getattr(loader, "batch_sampler", None)]
    owners.append(getattr(owners[-1], "sampler", None))
    found: dict[int, torch.Generator] = {}
    for owner in owners:
        generator = getattr(owner, "generator", None)
        if isinstance(generator, torch.Generator):
            found.setdefault(id(generator), generator)
    return list(found.values())


def _rng_states(generators: list[torch.Generator]) -> dict[str, Any]:
    """The states of Python's, NumPy's and torch's global generators (CPU and CUDA) and of ``generators``."""
    kind, keys, position, has_gauss, cached = np.random.get_state()  # noqa: NPY002 (the global one is seeded)
    return {
        "python": random.getstate(),
        "numpy": (kind, torch.from_numpy(keys.astype(np.int64)), position, has_gauss, cached),
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_initialized() else [],
        "generators": [generator.get_state() for generator in generators],
    }


def _set_rng_states(states: dict[str, Any], generators: list[torch.Generator]) -> None:
    """Restore what :func:`_rng_states` returned."""
    kind, keys, position, has_gauss, cached = states["numpy"]
    random.setstate(states["python"])
    np.random.set_state((kind, keys.numpy().astype(np.uint32), position, has_gauss, cached))  # noqa: NPY002
    torch.set_rng_state(states["torch"])
    if states["cuda"]:
        torch.cuda.set_rng_state_all(states["cuda"])
    for generator, state in zip(generators, states["generators"], strict=True):
        generator.set_state(state)


def _reduced(fabric: L.Fabric, metrics: dict[str, float]) -> dict[str, float]:
    """Means over ranks (each rank's own means when running alone)."""
    if fabric.world_size == 1 or not metrics:
        return metrics
    keys = sorted(metrics)
    values = fabric.all_reduce(torch.tensor([metrics[k] for k in keys]), reduce_op="mean")
    return dict(zip(keys, values.tolist(), strict=True))


def _is_loader(loader: Any) -> bool:
    return isinstance(loader, torch.utils.data.DataLoader)


def _fabric_strategy(strategy: Any) -> Any:
    """A Trainer strategy from config (a name, or a ``_target_`` dict) as Fabric takes it."""
    if isinstance(strategy, str):
        return strategy
    if isinstance(strategy, Mapping):
        target = str(strategy.get("_target_", ""))
        name = target.rsplit(".", 1)[-1]
        known = {"DDPStrategy": "ddp", "FSDPStrategy": "fsdp", "SingleDeviceStrategy": "auto"}
        if name in known:
            return known[name]
        raise LitlabError(f"the Fitter cannot map trainer.strategy {target!r}; use a strategy name")
    return strategy
