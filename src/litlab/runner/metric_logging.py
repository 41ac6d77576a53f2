"""Make Lightning's ``self.log`` skip a device move that has nothing to move.

Every ``self.log`` call moves the stored metric to the logged value's device with ``apply_to_collection``
over the metric's attributes, which deep-copies its metadata dataclass: about 0.3 ms per call on a CPU,
a fifth of a small model's step (benchmarks/trainer_overhead.py). When every tensor the metric holds is
already on that device the move changes nothing, so it is skipped; any other call runs Lightning's own.
"""

from __future__ import annotations

import functools
from typing import Any


def skip_redundant_metric_moves() -> None:
    """Patch ``_ResultMetric.to`` once per process; a Lightning without that class is left as it is."""
    import torch

    try:
        from lightning.pytorch.trainer.connectors.logger_connector.result import _ResultMetric
    except ImportError:
        return
    original = _ResultMetric.to
    if getattr(original, "skips_redundant_moves", False):
        return

    @functools.wraps(original)
    def to(self: Any, *args: Any, **kwargs: Any) -> Any:
        if len(args) == 1 and not kwargs and isinstance(args[0], torch.device) and self.is_tensor:
            tensors = [value for value in vars(self).values() if isinstance(value, torch.Tensor)]
            if all(tensor.device == args[0] for tensor in tensors):
                return self
        return original(self, *args, **kwargs)

    to.skips_redundant_moves = True  # type: ignore[attr-defined]
    _ResultMetric.to = to
