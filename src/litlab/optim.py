"""The optimizer and scheduler factories that configs build (``_partial_: true``), the form in which a
module hands them to Lightning, and the warm-up + cosine schedule several papers share. Light: torch is
imported only when a schedule is built."""

from __future__ import annotations

import math
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


def warmup_cosine(
    optimizer: torch.optim.Optimizer, total_steps: int, warmup_steps: int = 0, min_lr_ratio: float = 0.1
) -> torch.optim.lr_scheduler.LambdaLR:
    """Linear warm-up over ``warmup_steps``, then cosine decay to ``min_lr_ratio`` × lr at ``total_steps``."""
    from torch.optim.lr_scheduler import LambdaLR

    def factor(step: int) -> float:
        if step < warmup_steps:
            return (step + 1) / warmup_steps
        progress = min(1.0, (step - warmup_steps) / max(1, total_steps - warmup_steps))
        return min_lr_ratio + (1 - min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * progress))

    return LambdaLR(optimizer, factor)
