"""The steps every entry point shares: config checks, printing, seeding, building the Trainer."""

from __future__ import annotations

import json
import logging
import os
import sys
from pathlib import Path
from typing import Any

import hydra
import lightning as L
import torch
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from lightning.pytorch.callbacks import ProgressBar
from lightning.pytorch.loggers import WandbLogger
from omegaconf import DictConfig, OmegaConf

from litlab.callbacks.checkpoint_io import AtomicCheckpointIO
from litlab.callbacks.last_checkpoint import LastCheckpoint
from litlab.utils import slurm
from litlab.utils.errors import LitlabError
from litlab.utils.instantiate import instantiate_callbacks, instantiate_loggers
from litlab.utils.run_record import write_run_record

log = logging.getLogger("litlab")


def is_rank_zero() -> bool:
    """True in the process that owns the run folder (before or after the Trainer exists)."""
    return all(os.environ.get(var, "0") == "0" for var in ("RANK", "LOCAL_RANK", "SLURM_PROCID"))


def check_launch(cfg: DictConfig) -> None:
    """Stop the sweep on combinations that misbehave (a local multirun + DDP re-launches the sweep)."""
    if not HydraConfig.initialized() or HydraConfig.get().mode != RunMode.MULTIRUN:
        return
    strategy = OmegaConf.select(cfg, "trainer.strategy")
    strategy_name = (
        strategy if isinstance(strategy, str) else str(OmegaConf.select(cfg, "trainer.strategy._target_"))
    )
    processes = _as_int(OmegaConf.select(cfg, "trainer.devices")) * _as_int(
        OmegaConf.select(cfg, "trainer.num_nodes")
    )
    # Lightning starts DDP/FSDP children by re-running sys.argv (spawn strategies excepted); only inside
    # a SLURM job does srun start them instead. Anywhere else each child re-runs the whole sweep.
    reruns_argv = not any(name in strategy_name.lower() for name in ("spawn", "notebook", "fork"))
    # SystemExit, not LitlabError: a multirun records a failed trial as NaN and goes on, and every
    # trial would fail the same way.
    if processes > 1 and reruns_argv and not slurm.in_slurm_job():
        raise SystemExit(
            "litlab: a multirun (-m) with a multi-process strategy outside SLURM re-launches the whole "
            "sweep in every DDP child, so it was stopped before any job ran. Use hydra/launcher=slurm "
            "(each job gets its own srun tasks), or single-process jobs (resources.devices=1 with "
            "trainer=cpu or trainer=gpu)."
        )


def _as_int(value: Any) -> int:
    """Trainer ``devices``/``num_nodes`` as a count: a list counts its ids, -1 (all) counts as 2, "auto" 1."""
    if isinstance(value, int):
        return value if value >= 0 else 2
    if isinstance(value, str) and value.isdigit():
        return int(value)
    if isinstance(value, list | tuple) or OmegaConf.is_list(value):
        return len(value)
    return 1


def prepare(cfg: DictConfig) -> Path:
    """Seed, print the config, write the run record (rank 0) and return the run folder."""
    output_dir = Path(cfg.paths.output_dir)
    if cfg.get("seed") is not None:
        L.seed_everything(cfg.seed, workers=True, verbose=False)
    if cfg.extras.get("torch_threads"):
        torch.set_num_threads(cfg.extras.torch_threads)
    if torch.cuda.is_available() and cfg.extras.get("matmul_precision"):
        torch.set_float32_matmul_precision(cfg.extras.matmul_precision)
    if is_rank_zero():
        if cfg.extras.get("print_config"):
            from litlab.utils.printing import print_config_tree

            print_config_tree(cfg)
        if cfg.extras.get("write_run_record"):
            write_run_record(cfg, output_dir)
    return output_dir


def build_data_and_model(cfg: DictConfig) -> tuple[L.LightningDataModule, L.LightningModule]:
    """Instantiate ``cfg.data`` and ``cfg.model`` with config lists/dicts turned into Python containers, so
    hyperparameters saved into checkpoints load under ``weights_only=True``."""
    datamodule = hydra.utils.instantiate(cfg.data, _convert_="partial")
    model = hydra.utils.instantiate(cfg.model, _convert_="partial")
    return datamodule, model


def build_trainer(cfg: DictConfig) -> L.Trainer:
    """Instantiate the Trainer with the configured callbacks, loggers and atomic checkpointing."""
    callbacks = instantiate_callbacks(cfg.get("callbacks"))
    loggers = instantiate_loggers(cfg.get("logger"))
    # LastCheckpoint runs after ModelCheckpoint, so last.ckpt holds the best-model bookkeeping too.
    callbacks.sort(key=lambda callback: isinstance(callback, LastCheckpoint))
    extra: dict[str, Any] = {}
    if not sys.stdout.isatty() and OmegaConf.select(cfg, "trainer.enable_progress_bar") is None:
        # Nobody watches a bar in a batch job, CI or a pipe, and redrawing it costs a small model 15-30%
        # of its step time (benchmarks/trainer_overhead.py). +trainer.enable_progress_bar=true keeps it.
        callbacks = [callback for callback in callbacks if not isinstance(callback, ProgressBar)]
        extra["enable_progress_bar"] = False
    plugins: list[Any] = []
    strategy = OmegaConf.select(cfg, "trainer.strategy")
    if not (isinstance(strategy, DictConfig) and "FSDP" in str(strategy.get("_target_", ""))):
        plugins.append(AtomicCheckpointIO())
    environment = slurm.cluster_environment()
    if environment is not None:
        plugins.append(environment)
        log.info(slurm.describe_task())
    return hydra.utils.instantiate(
        cfg.trainer, callbacks=callbacks, logger=loggers or False, plugins=plugins, **extra
    )


def last_checkpoint_path(trainer: L.Trainer) -> str:
    """The ``last.ckpt`` of the first checkpoint callback that wrote one ("" if none did)."""
    paths = [getattr(callback, "last_model_path", "") for callback in trainer.checkpoint_callbacks]
    return next((path for path in paths if path), "")


def log_hyperparameters(cfg: DictConfig, trainer: L.Trainer, model: L.LightningModule) -> None:
    """Log the resolved config once, with the model's parameter count."""
    if not trainer.loggers:
        return
    hparams = OmegaConf.to_container(cfg, resolve=True)
    hparams.pop("hydra", None)
    hparams["model/params_total"] = sum(p.numel() for p in model.parameters())
    hparams["model/params_trainable"] = sum(p.numel() for p in model.parameters() if p.requires_grad)
    for logger in trainer.loggers:
        logger.log_hyperparams(hparams)


def metric_value(metrics: dict[str, Any], name: str | None) -> float | None:
    """The value of ``optimized_metric`` (an error listing the logged keys when it is missing)."""
    if not name:
        return None
    if name not in metrics:
        logged = ", ".join(sorted(metrics)) or "none"
        raise LitlabError(f"optimized_metric={name!r} was not logged; logged metrics are: {logged}")
    value = metrics[name]
    return float(value.item() if isinstance(value, torch.Tensor) else value)


def write_results(output_dir: Path, metrics: dict[str, Any], name: str | None, value: float | None) -> Path:
    """Write the final scalar metrics to ``results.json`` (what sweep reports read)."""
    scalars = {
        key: float(v.item() if isinstance(v, torch.Tensor) else v)
        for key, v in metrics.items()
        if (isinstance(v, torch.Tensor) and v.numel() == 1) or isinstance(v, int | float)
    }
    path = output_dir / "results.json"
    payload = {"metrics": scalars, "optimized_metric": name, "value": value}
    path.write_text(json.dumps(payload, indent=2, sort_keys=True, allow_nan=True) + "\n")
    return path


def finish_loggers(trainer: L.Trainer | None) -> None:
    """Close wandb runs so that the next multirun job starts a new one."""
    if trainer is None:
        return
    if any(isinstance(logger, WandbLogger) for logger in trainer.loggers):
        import wandb

        wandb.finish()


def resolve_resume(cfg: DictConfig, output_dir: Path) -> str | None:
    """``resume=auto``: the run folder's last.ckpt if it exists; a path: that path; else None.

    A job that SLURM requeued (SLURM_RESTART_COUNT > 0) resumes as with ``auto`` unless told otherwise.
    """
    resume = cfg.get("resume")
    if resume is None and slurm.restart_count() > 0:
        log.info("SLURM restart %d of job %s: resume=auto", slurm.restart_count(), slurm.job_id())
        resume = "auto"
    if resume in (None, False, "none"):
        return None
    if resume == "auto":
        last = output_dir / "checkpoints" / "last.ckpt"
        if last.exists():
            log.info("resuming from %s", last)
            return str(last)
        log.info("resume=auto: no %s yet, starting fresh", last)
        return None
    if not Path(resume).exists():
        raise LitlabError(f"resume={resume} does not exist; give a checkpoint path or resume=auto")
    return str(resume)
