"""Send a task's results (``results.json``, its tables and plots) to the loggers chosen with ``logger=``.

``litlab-run task=... logger=wandb`` gives a wandb run with the task's resolved config, its scalar metrics
(in the run summary, where a wandb sweep reads its metric), every table and every plot; ``logger=tensorboard``
the metrics and plots. The run folder keeps the same files either way.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import TYPE_CHECKING

from omegaconf import DictConfig

from litlab.runner.experiment import logged_config
from litlab.runner.instantiate import instantiate_loggers

if TYPE_CHECKING:
    from lightning.pytorch.loggers import TensorBoardLogger, WandbLogger


def send_results(cfg: DictConfig, folder: Path) -> None:
    """Log ``folder/results.json`` and the files it lists to every logger in ``cfg.logger``; close them."""
    loggers = instantiate_loggers(cfg.get("logger"))
    if not loggers:
        return
    from lightning.pytorch.loggers import TensorBoardLogger, WandbLogger

    results = json.loads((folder / "results.json").read_text())
    metrics = {k: float(v) for k, v in results["metrics"].items() if math.isfinite(float(v))}
    hparams = logged_config(cfg)
    plots = {Path(plot).stem: folder / plot for plot in results["plots"]}
    for logger in loggers:
        logger.log_hyperparams(hparams)
        logger.log_metrics(metrics, step=0)
        if isinstance(logger, WandbLogger):
            _tables_and_plots_to_wandb(logger, folder, results["tables"], plots)
        elif isinstance(logger, TensorBoardLogger):
            _plots_to_tensorboard(logger, plots)
        logger.finalize("success")
    if any(isinstance(logger, WandbLogger) for logger in loggers):
        import wandb

        wandb.finish()


def _tables_and_plots_to_wandb(
    logger: WandbLogger, folder: Path, tables: dict[str, str], plots: dict[str, Path]
) -> None:
    import pandas as pd

    for name, csv in tables.items():
        logger.log_table(key=f"tables/{name}", dataframe=pd.read_csv(folder / csv))
    for name, path in plots.items():
        logger.log_image(key=f"plots/{name}", images=[str(path)])


def _plots_to_tensorboard(logger: TensorBoardLogger, plots: dict[str, Path]) -> None:
    import matplotlib.image

    for name, path in plots.items():
        image = matplotlib.image.imread(path)[..., :3]
        logger.experiment.add_image(f"plots/{name}", image, dataformats="HWC")
