"""A quiet, honest console: the config tree, progress and the summary, not library tips.

Each silenced message is matched by its text and by the library that emits it, never by a global
filter, so warnings from litlab and from user code still show.
"""

from __future__ import annotations

import logging
import warnings

# (message regex, module regex) of warnings that tell a litlab user nothing they can act on.
SILENCED_WARNINGS = (
    # litlab starts SLURM jobs through srun itself (hydra/launcher=slurm) or runs outside SLURM on purpose.
    (r"The `srun` command is available on your system but is not used", r"lightning"),
    # Lightning's own use of a torch pytree API.
    (r"`isinstance\(treespec, LeafSpec\)` is deprecated", r"lightning"),
    # Full-batch training has one batch per epoch; litlab logs training metrics per epoch.
    (r"The number of training batches \(\d+\) is smaller than the logging interval", r"lightning"),
    # litlab keeps num_workers=0 for in-memory tensors on purpose (vectorised batches, no collation).
    (r"The '\w+_dataloader' does not have many workers which may be a bottleneck", r"lightning"),
)
# Lightning info lines that are advertising or restate the config.
SILENCED_INFO_PREFIXES = (
    "💡 Tip",
    "GPU available",
    "TPU available",
    "HPU available",
    "`Trainer.fit` stopped",
)
LIGHTNING_LOGGERS = ("lightning.pytorch.utilities.rank_zero", "lightning.fabric.utilities.rank_zero")


class _DropPrefixes(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.getMessage()).startswith(SILENCED_INFO_PREFIXES)


def quiet_third_party() -> None:
    """Install the filters above (idempotent)."""
    for message, module in SILENCED_WARNINGS:
        warnings.filterwarnings("ignore", message=message, module=module)
    for name in LIGHTNING_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, _DropPrefixes) for f in logger.filters):
            logger.addFilter(_DropPrefixes())
