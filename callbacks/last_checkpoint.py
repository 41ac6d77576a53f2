"""``last.ckpt`` for ``resume=auto``: saved periodically, at the end of fit, and on preemption signals."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from pathlib import Path
from types import FrameType
from typing import Any

import lightning as L
import torch
from lightning.pytorch.callbacks import Checkpoint
from lightning.pytorch.utilities import rank_zero_info, rank_zero_warn
from lightning.pytorch.utilities.warnings import PossibleUserWarning

from litlab.core import slurm

# What a save point agrees on across ranks (the max over ranks wins).
_NOTHING, _PERIODIC, _STOP, _REQUEUE = 0, 1, 2, 3
_INEXACT = (
    "saving last.ckpt mid-epoch although the train loader has no state_dict: a resume restarts this "
    "epoch's data from its start (close to, not exactly, an uninterrupted run)"
)


class Preempted(SystemExit):
    """Ends a run whose state is in last.ckpt after a signal.

    A SystemExit, not an Exception, so that neither a Hydra multirun nor submitit records the job as
    done or failed: the requeued (or re-launched) job continues it.
    """


def _signal_number(name: str | int) -> signal.Signals:
    if isinstance(name, int):
        return signal.Signals(name)
    return signal.Signals[name if name.upper().startswith("SIG") else f"SIG{name.upper()}"]


class LastCheckpoint(Checkpoint):
    """Owns ``<dirpath>/last.ckpt``, saved where Lightning resumes exactly (bit-identical on CPU).

    Saved every ``every_n_train_steps`` optimizer steps and/or every ``every_n_minutes``, at the end of
    fit, and after SIGTERM or ``requeue_signal``. Signals only set a flag; the save waits for the next
    exact point: a train-epoch end, or a batch end inside the epoch when the train loader is resumable
    (has ``state_dict``) and neither validation nor a pending gradient accumulation follows. If the epoch
    end is more than ``exact_wait_s`` away (estimated from the step time), it saves at a batch end anyway:
    Lightning then restarts that epoch's data from its start, so the resume is close but not exact.
    After a signal, training stops before the next step (``Preempted``); for ``requeue_signal`` inside a
    SLURM job rank 0 first runs ``scontrol requeue`` (while SLURM_RESTART_COUNT < ``max_requeues``), and
    the requeued job resumes from last.ckpt. Under DDP the ranks agree on every decision (one all-reduce).
    """

    def __init__(
        self,
        dirpath: str | Path,
        every_n_train_steps: int | None = None,
        every_n_minutes: float | None = None,
        requeue_signal: str | int = "SIGUSR2",
        max_requeues: int = 20,
        exact_wait_s: float = 60.0,
    ) -> None:
        super().__init__()
        if every_n_train_steps is not None and every_n_train_steps < 1:
            raise ValueError(f"every_n_train_steps must be >= 1 or null, got {every_n_train_steps}")
        if every_n_minutes is not None and every_n_minutes <= 0:
            raise ValueError(f"every_n_minutes must be > 0 or null, got {every_n_minutes}")
        self.path = Path(dirpath) / "last.ckpt"
        self.previous_path = Path(dirpath) / "last.prev.ckpt"
        self.every_n_train_steps = every_n_train_steps
        self.every_n_minutes = every_n_minutes
        self.requeue_signal = _signal_number(requeue_signal)
        self.max_requeues = max_requeues
        self.exact_wait_s = exact_wait_s
        self._signal: int | None = None
        self._stop: int = _NOTHING
        self._requeued = False
        self._last_step = self._previous_step = -1
        self._last_time = self._epoch_start = time.monotonic()
        self._previous_handlers: dict[int, Any] = {}

    @property
    def last_model_path(self) -> str:
        """The path of last.ckpt once written (what the run summary and ``test_ckpt=last`` use)."""
        return str(self.path) if self.path.exists() else ""

    # Signals -------------------------------------------------------------------------------------
    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        if self._signal != self.requeue_signal:  # a requeue request wins over the SIGTERM that follows it
            self._signal = signum

    def _install_handlers(self) -> None:
        if threading.current_thread() is not threading.main_thread() or self._previous_handlers:
            return
        for signum in (signal.SIGTERM, self.requeue_signal):
            self._previous_handlers[signum] = signal.signal(signum, self._on_signal)

    def _restore_handlers(self) -> None:
        for signum, handler in self._previous_handlers.items():
            signal.signal(signum, handler)
        self._previous_handlers = {}

    # Lightning hooks -----------------------------------------------------------------------------
    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._last_step, self._last_time = trainer.global_step, time.monotonic()
        self._signal, self._stop = None, _NOTHING
        self._install_handlers()

    def on_train_epoch_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._epoch_start = time.monotonic()

    def on_train_batch_start(
        self, trainer: L.Trainer, pl_module: L.LightningModule, batch: Any, batch_idx: int
    ) -> None:
        if self._stop:
            self._exit(trainer)

    def on_train_batch_end(
        self, trainer: L.Trainer, pl_module: L.LightningModule, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        if self._stop or _followed_by_eval_or_epoch_end(trainer, batch_idx):
            return
        exact = _resumable(trainer.train_dataloader)
        code, far = self._agree(
            trainer, self._due_code(trainer), not exact and self._epoch_end_far(batch_idx, trainer)
        )
        if code and (exact or far):
            if not exact:
                rank_zero_warn(_INEXACT, category=PossibleUserWarning)
            self._act(trainer, code)

    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if not self._stop:
            code, _ = self._agree(trainer, self._due_code(trainer), False)
            if code:
                self._act(trainer, code)
            # Let Lightning finish this epoch (its metrics are logged after this hook) and end fit; then
            # on_train_end stops the run. If min_epochs forbids that, the next batch start does.
            trainer.should_stop = trainer.should_stop or bool(self._stop)

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if not trainer.fast_dev_run and (trainer.global_step != self._last_step or not self.path.exists()):
            self._save(trainer)
        if not self._stop:
            self._stop = self._agree(trainer, self._signal_code(), False)[0]
            self._maybe_requeue(trainer)
        self._restore_handlers()
        if self._stop:
            self._exit(trainer)

    def on_exception(
        self, trainer: L.Trainer, pl_module: L.LightningModule, exception: BaseException
    ) -> None:
        self._restore_handlers()

    def teardown(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        self._restore_handlers()

    # Decisions -----------------------------------------------------------------------------------
    def _signal_code(self) -> int:
        if self._signal is None:
            return _NOTHING
        return _REQUEUE if self._signal == self.requeue_signal else _STOP

    def _due_code(self, trainer: L.Trainer) -> int:
        steps = self.every_n_train_steps
        by_steps = steps is not None and trainer.global_step - self._last_step >= steps
        minutes = self.every_n_minutes
        by_time = minutes is not None and time.monotonic() - self._last_time >= 60 * minutes
        return max(self._signal_code(), _PERIODIC if by_steps or by_time else _NOTHING)

    def _epoch_end_far(self, batch_idx: int, trainer: L.Trainer) -> bool:
        """Whether the rest of the epoch is estimated to take longer than ``exact_wait_s``."""
        remaining = trainer.num_training_batches - (batch_idx + 1)
        per_batch = (time.monotonic() - self._epoch_start) / (batch_idx + 1)
        return remaining * per_batch > self.exact_wait_s

    @staticmethod
    def _agree(trainer: L.Trainer, code: int, far: bool) -> tuple[int, bool]:
        """The largest of each over all ranks, so every rank saves and stops at the same step."""
        if trainer.world_size == 1:
            return code, far
        tensor = torch.tensor([code, int(far)], device=trainer.strategy.root_device)
        code_max, far_max = trainer.strategy.reduce(tensor, reduce_op="max").tolist()
        return int(code_max), bool(far_max)

    def _act(self, trainer: L.Trainer, code: int) -> None:
        if not trainer.fast_dev_run:
            self._save(trainer)
        if code >= _STOP:
            self._stop = code
            self._maybe_requeue(trainer)

    def _save(self, trainer: L.Trainer) -> None:
        # The previous save stays as last.prev.ckpt (a hard link, no copy) until the next one, so that a
        # divergence found one step late can roll back to a state from before it (DivergenceGuard).
        if trainer.is_global_zero and self.path.exists():
            self.previous_path.unlink(missing_ok=True)
            os.link(self.path, self.previous_path)
        self._previous_step = self._last_step
        trainer.save_checkpoint(self.path, weights_only=False)  # the full state: resume needs it
        self._last_step, self._last_time = trainer.global_step, time.monotonic()
        rank_zero_info(f"saved {self.path} at step {trainer.global_step}")

    def roll_back(self, bad_step: int) -> bool:
        """Put the previous save back as last.ckpt if the current one holds the weights of ``bad_step``."""
        if self._last_step < bad_step or not self.previous_path.exists():
            return False
        os.replace(self.previous_path, self.path)
        self._last_step = self._previous_step
        return True

    def _maybe_requeue(self, trainer: L.Trainer) -> None:
        if self._stop != _REQUEUE or self._requeued or not slurm.in_slurm_job():
            return
        if slurm.restart_count() >= self.max_requeues:
            rank_zero_info(f"not requeueing: the job was already requeued {slurm.restart_count()} times")
            return
        self._requeued = slurm.requeue() if trainer.is_global_zero else True

    def _exit(self, trainer: L.Trainer) -> None:
        self._restore_handlers()
        signum = signal.SIGTERM if self._stop == _STOP else self.requeue_signal
        if self._requeued:
            then = f"SLURM job {slurm.job_id()} was requeued and resumes from it"
        else:
            then = f"continue with the same command plus run_id={self.path.parent.parent.name} resume=auto"
        if trainer.is_global_zero:
            print(
                f"litlab: stopped by {signum.name} after step {trainer.global_step}; {self.path} holds that "
                f"state; {then}",
                flush=True,
            )
            _mark_wandb_run_preempting()
        raise Preempted(128 + int(signum))


def _mark_wandb_run_preempting() -> None:
    """Tell wandb this run was preempted, so a sweep hands the same run (id, parameters) out again."""
    wandb = sys.modules.get("wandb")
    run = getattr(wandb, "run", None)
    if run is not None:
        run.mark_preempting()


def _followed_by_eval_or_epoch_end(trainer: L.Trainer, batch_idx: int) -> bool:
    """Whether validation, the epoch end or an unfinished gradient accumulation follows this batch."""
    if batch_idx + 1 >= trainer.num_training_batches or (batch_idx + 1) % trainer.accumulate_grad_batches:
        return True
    every_epoch = trainer.check_val_every_n_epoch
    if not trainer.enable_validation or (every_epoch and (trainer.current_epoch + 1) % every_epoch):
        return False
    val_check = trainer.val_check_batch
    return isinstance(val_check, int) and (batch_idx + 1) % val_check == 0


def _resumable(loaders: Any) -> bool:
    """Whether every train loader can save and restore its position (Lightning then resumes mid-epoch)."""
    if isinstance(loaders, dict):
        return all(_resumable(loader) for loader in loaders.values())
    if isinstance(loaders, list | tuple):
        return all(_resumable(loader) for loader in loaders)
    return hasattr(loaders, "state_dict") and hasattr(loaders, "load_state_dict")
