"""Stop a run at the first non-finite loss, before a bad state can be checkpointed."""

from __future__ import annotations

import math

import lightning as L
import torch

from litlab.core.errors import LitlabError


class NonFiniteLossError(LitlabError):
    """Raised when the training loss becomes NaN or infinite."""


class NonFiniteGuard(L.Callback):
    """Raise :class:`NonFiniteLossError` when the training loss is NaN/Inf, before its backward pass.

    Raising (rather than only setting ``should_stop``) skips every later checkpoint save, so
    ``last.ckpt`` remains the last good state and the message says where it is.
    """

    def __init__(self, check_every_n_steps: int = 1) -> None:
        self.check_every_n_steps = check_every_n_steps

    def on_before_backward(
        self, trainer: L.Trainer, pl_module: L.LightningModule, loss: torch.Tensor
    ) -> None:
        # Checked before backward, so the optimiser never applies a non-finite update.
        if trainer.global_step % self.check_every_n_steps:
            return
        value = loss.detach().float().item()
        if math.isfinite(value):
            return
        paths = [getattr(callback, "last_model_path", "") for callback in trainer.checkpoint_callbacks]
        last = next((path for path in paths if path), "none written yet")
        raise NonFiniteLossError(
            f"training loss became {value} at epoch {trainer.current_epoch}, step {trainer.global_step}. "
            f"The last good checkpoint is kept: {last}. Lower the learning rate, enable gradient "
            "clipping (trainer.gradient_clip_val=1.0) or check the data for NaNs."
        )
