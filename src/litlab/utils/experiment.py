"""The steps every entry point shares: config checks, printing, seeding, building the Trainer."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

import hydra
import lightning as L
import torch
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from lightning.pytorch.loggers import WandbLogger
from omegaconf import DictConfig, OmegaConf

from litlab.callbacks.checkpoint_io import AtomicCheckpointIO
from litlab.utils.errors import LitlabError
from litlab.utils.instantiate import instantiate_callbacks, instantiate_loggers
from litlab.utils.run_record import write_run_record

log = logging.getLogger("litlab")


def is_rank_zero() -> bool:
    """True in the process that owns the run folder (before or after the Trainer exists)."""
    return all(os.environ.get(var, "0") == "0" for var in ("RANK", "LOCAL_RANK", "SLURM_PROCID"))


def check_launch(cfg: DictConfig) -> None:
    """Refuse combinations that silently misbehave (local multirun + DDP re-launches the sweep)."""
    if not HydraConfig.initialized():
        return
    hydra_cfg = HydraConfig.get()
    strategy = OmegaConf.select(cfg, "trainer.strategy")
    strategy_name = (
        strategy if isinstance(strategy, str) else str(OmegaConf.select(cfg, "trainer.strategy._target_"))
    )
    launcher = str(OmegaConf.select(hydra_cfg, "launcher._target_") or "")
    uses_ddp = "ddp" in strategy_name.lower() or "fsdp" in strategy_name.lower()
    spawns = (OmegaConf.select(cfg, "trainer.devices") or 1) not in (
        1,
        "1",
    ) and "SLURM_PROCID" not in os.environ
    if hydra_cfg.mode == RunMode.MULTIRUN and uses_ddp and spawns and "submitit" not in launcher:
        raise LitlabError(
            "a local multirun (-m) with a multi-process strategy re-launches the whole sweep in every "
            "DDP child. Use hydra/launcher=slurm (or submitit_local), or single-device jobs "
            "(trainer=cpu/gpu)."
        )


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


def build_trainer(cfg: DictConfig) -> L.Trainer:
    """Instantiate the Trainer with the configured callbacks, loggers and atomic checkpointing."""
    callbacks = instantiate_callbacks(cfg.get("callbacks"))
    loggers = instantiate_loggers(cfg.get("logger"))
    plugins: list[Any] = []
    strategy = OmegaConf.select(cfg, "trainer.strategy")
    if not (isinstance(strategy, DictConfig) and "FSDP" in str(strategy.get("_target_", ""))):
        plugins.append(AtomicCheckpointIO())
    return hydra.utils.instantiate(cfg.trainer, callbacks=callbacks, logger=loggers or False, plugins=plugins)


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
    """``resume=auto``: the run folder's last.ckpt if it exists; a path: that path; else None."""
    resume = cfg.get("resume")
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
