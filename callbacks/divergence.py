"""Stop a run that diverges, before a bad state can become the checkpoint a resume starts from."""

from __future__ import annotations

import math

import lightning as L
import torch

from litlab.core.errors import LitlabError


class DivergenceError(LitlabError):
    """The training loss or the weights became non-finite, or the loss exploded."""


class DivergenceGuard(L.Callback):
    """Raise :class:`DivergenceError` when training diverges; no checkpoint holds a diverged state.

    The loss is checked before its backward pass every ``check_every_n_steps`` steps (NaN/Inf, or above
    ``max_loss_ratio`` times the first loss). The weights and the optimizer state (NaN/Inf) are checked
    every ``check_weights_every_n_steps`` steps and before any checkpoint is written: that check reads
    every parameter and state tensor (on a small model as costly as its step), and a non-finite weight
    makes the next loss non-finite anyway. Raising skips every later save; if ``last.ckpt`` was written
    from the weights that produced the bad loss, it is rolled back to the previous one (``LastCheckpoint``).
    On an accelerator, reading a loss waits for its step to finish, so checked losses stay on the device and
    are read together every ``read_every_n_checks`` checks, at the epoch end and before any checkpoint
    write (one synchronisation instead of one per step); the error names the step whose loss went bad.
    """

    def __init__(
        self,
        check_every_n_steps: int = 1,
        max_loss_ratio: float | None = 1e6,
        check_weights_every_n_steps: int = 100,
        read_every_n_checks: int = 50,
    ) -> None:
        for name, value in (
            ("check_every_n_steps", check_every_n_steps),
            ("check_weights_every_n_steps", check_weights_every_n_steps),
            ("read_every_n_checks", read_every_n_checks),
        ):
            if value < 1:
                raise ValueError(f"{name} must be >= 1, got {value}")
        self.check_every_n_steps = check_every_n_steps
        self.check_weights_every_n_steps = check_weights_every_n_steps
        self.max_loss_ratio = max_loss_ratio
        self.read_every_n_checks = read_every_n_checks
        self.first_loss: float | None = None
        self._pending: list[tuple[int, torch.Tensor]] = []  # (step, loss) not read yet

    def state_dict(self) -> dict[str, float | None]:
        return {"first_loss": self.first_loss}

    def load_state_dict(self, state_dict: dict[str, float | None]) -> None:
        self.first_loss = state_dict.get("first_loss")

    def on_before_backward(
        self, trainer: L.Trainer, pl_module: L.LightningModule, loss: torch.Tensor
    ) -> None:
        step = trainer.global_step
        if step % self.check_every_n_steps:
            return
        if loss.device.type == "cpu":  # reading it waits for nothing: check it now
            self._check_loss(trainer, step, loss.item())
            return
        self._pending.append((step, loss.detach()))
        if self.first_loss is None or len(self._pending) >= self.read_every_n_checks:
            self._check_losses(trainer)

    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._check_losses(trainer)

    def _check_losses(self, trainer: L.Trainer) -> None:
        """Read the pending losses (one transfer) and fail at the first non-finite or exploded one."""
        if not self._pending:
            return
        steps = [step for step, _ in self._pending]
        values = torch.stack([loss.float() for _, loss in self._pending]).tolist()
        self._pending = []
        for step, value in zip(steps, values, strict=True):
            self._check_loss(trainer, step, value)

    def _check_loss(self, trainer: L.Trainer, step: int, value: float) -> None:
        """Fail if the loss of ``step`` is non-finite or above ``max_loss_ratio`` x the first loss."""
        if not math.isfinite(value):
            self._fail(trainer, f"the training loss became {value}", step)
        if self.first_loss is None:
            self.first_loss = abs(value)
        limit = None if self.max_loss_ratio is None else self.max_loss_ratio * max(self.first_loss, 1e-12)
        if limit is not None and abs(value) > limit:
            self._fail(
                trainer,
                f"the training loss exploded to {value:.3g} (more than {self.max_loss_ratio:g} x the "
                f"first loss {self.first_loss:.3g}; callbacks.divergence_guard.max_loss_ratio sets the "
                "limit)",
                step,
            )

    def on_train_batch_end(
        self, trainer: L.Trainer, pl_module: L.LightningModule, outputs: object, batch: object, batch_idx: int
    ) -> None:
        if trainer.global_step % self.check_weights_every_n_steps == 0:
            self._check_weights(trainer, pl_module, "after the optimizer step")

    def on_save_checkpoint(
        self, trainer: L.Trainer, pl_module: L.LightningModule, checkpoint: dict[str, object]
    ) -> None:
        self._check_losses(trainer)
        self._check_weights(trainer, pl_module, "before a checkpoint was written (it was not)")

    def _check_weights(self, trainer: L.Trainer, pl_module: L.LightningModule, when: str) -> None:
        if not _all_finite(pl_module.parameters()):
            self._fail(trainer, f"the weights became non-finite, found {when}")
        for optimizer in trainer.optimizers:
            states = (v for s in optimizer.state.values() for v in s.values() if isinstance(v, torch.Tensor))
            if not _all_finite(states):
                self._fail(trainer, f"the optimizer state became non-finite, found {when}")

    def _fail(self, trainer: L.Trainer, what: str, step: int | None = None) -> None:
        step = trainer.global_step if step is None else step
        rolled_back = any(_roll_back(callback, step) for callback in trainer.callbacks)
        paths = [getattr(callback, "last_model_path", "") for callback in trainer.checkpoint_callbacks]
        last = next((path for path in paths if path), "")
        kept = (
            f"The last checkpoint from before it is kept: {last}." if last else "No checkpoint was written."
        )
        raise DivergenceError(
            f"training diverged at epoch {trainer.current_epoch}, step {step}: {what}. "
            f"{kept}{' (rolled back one save)' if rolled_back else ''} Start a new run (run_id=<new name>) "
            "with a lower learning rate (e.g. model.optimizer.lr=<a tenth>) or gradient clipping "
            "(trainer.gradient_clip_val=1.0); resuming restores the same learning rate."
        )


def _all_finite(tensors: object) -> bool:
    """True if no tensor holds a NaN or Inf: one fused max-abs per dtype and device (NaN propagates)."""
    groups: dict[tuple[torch.dtype, torch.device], list[torch.Tensor]] = {}
    for tensor in tensors:  # type: ignore[attr-defined]
        if tensor.is_floating_point():
            groups.setdefault((tensor.dtype, tensor.device), []).append(tensor.detach())
    return all(
        bool(torch.stack(torch._foreach_norm(group, math.inf)).isfinite().all()) for group in groups.values()
    )


def _roll_back(callback: object, bad_step: int) -> bool:
    roll_back = getattr(callback, "roll_back", None)
    return bool(roll_back(bad_step)) if callable(roll_back) else False
