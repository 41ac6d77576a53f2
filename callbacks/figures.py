"""Save figures that a method produces as PNGs in the run folder and send them to image loggers."""

from __future__ import annotations

import logging
from pathlib import Path

import lightning as L
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from lightning.pytorch.loggers import TensorBoardLogger, WandbLogger  # noqa: E402
from lightning.pytorch.utilities import rank_zero_only  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from litlab.core.figures import save_figure  # noqa: E402

log = logging.getLogger(__name__)


@rank_zero_only
def log_figure(trainer: L.Trainer, name: str, figure: Figure) -> Path:
    """Write ``figure`` to ``plots/<name>.png`` and to every wandb/tensorboard logger; close it."""
    path = save_figure(figure, trainer.default_root_dir, name, close=False)
    for logger in trainer.loggers:
        if isinstance(logger, WandbLogger):
            logger.log_image(key=f"plots/{name}", images=[str(path)], step=trainer.global_step)
        elif isinstance(logger, TensorBoardLogger):
            logger.experiment.add_figure(f"plots/{name}", figure, global_step=trainer.global_step)
    plt.close(figure)
    return path


class FigureCallback(L.Callback):
    """Ask the module for figures (``module.figures(stage) -> {name: Figure}``) and log them.

    Called at the end of fit and test, and every ``every_n_epochs`` validation epochs if set.
    Modules without a ``figures`` method are left alone.
    """

    def __init__(self, every_n_epochs: int | None = None) -> None:
        self.every_n_epochs = every_n_epochs

    def _log(self, trainer: L.Trainer, module: L.LightningModule, stage: str) -> None:
        make = getattr(module, "figures", None)
        if make is None or trainer.sanity_checking or getattr(trainer, "fast_dev_run", False):
            return
        for name, figure in make(stage).items():
            if trainer.is_global_zero:
                log_figure(trainer, f"{stage}_{name}", figure)
            else:
                plt.close(figure)

    def on_validation_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if self.every_n_epochs and (trainer.current_epoch + 1) % self.every_n_epochs == 0:
            self._log(trainer, pl_module, f"epoch{trainer.current_epoch:04d}")

    def on_fit_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._log(trainer, pl_module, "fit")

    def on_test_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._log(trainer, pl_module, "test")
