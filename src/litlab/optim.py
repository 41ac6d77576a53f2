"""The optimizer and scheduler factories that configs build (``_partial_: true``), and the form in which a
module hands them to Lightning. Light: torch is imported only for type checking."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

OptimizerFactory = Callable[..., "torch.optim.Optimizer"]
SchedulerFactory = Callable[..., "torch.optim.lr_scheduler.LRScheduler"]


def step_scheduled(optimizer: torch.optim.Optimizer, scheduler: Any | None) -> Any:
    """``configure_optimizers``' return: the optimizer, with its scheduler (if any) stepped after every
    optimizer step, so a schedule's length never depends on the number of batches per epoch."""
    if scheduler is None:
        return optimizer
    return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}
