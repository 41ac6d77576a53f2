"""The steps every job shares: open the run folder, seed, build data/model/Trainer, write results.

Lightning and torch are imported inside the functions, after the command line has been checked.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from omegaconf import DictConfig, OmegaConf

from litlab.core.errors import ConfigError, LitlabError
from litlab.runner.console import quiet_third_party
from litlab.runner.launch import is_rank_zero, slurm_restarted
from litlab.runner.run_folder import RunLock, check_not_taken, clean_stale_temporaries
from litlab.runner.validate import check_config

if TYPE_CHECKING:
    import lightning as L

log = logging.getLogger("litlab")


def check_launch(cfg: DictConfig) -> None:
    """Stop a local multirun with a multi-process strategy (each DDP child would re-run the whole sweep)."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    from litlab.core import slurm

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


@contextmanager
def open_run(cfg: DictConfig) -> Iterator[Path]:
    """Own the run folder for the job's life: refuse a taken folder, lock it, clean it, seed, print.

    Only rank 0 checks and locks; the lock is released when the job ends (or the process dies). Nothing
    is recorded yet: ``record_run`` writes the record once data, model and Trainer are built, so a run
    that cannot start leaves only its log (with the traceback) behind.
    """
    check_config(cfg)
    quiet_third_party()
    folder = Path(cfg.paths.output_dir)
    lock = None
    if is_rank_zero():
        check_not_taken(folder, cfg.get("resume"), restarted=slurm_restarted())
        lock = RunLock(folder).acquire()
        for path in clean_stale_temporaries(folder):
            log.info("removed %s, left by an interrupted write", path)
    try:
        _seed_and_configure(cfg)
        if is_rank_zero() and cfg.extras.get("print_config"):
            from litlab.runner.printing import print_config_tree

            print_config_tree(cfg)
        yield folder
    finally:
        if lock is not None:
            lock.release()


def record_run(cfg: DictConfig, folder: Path) -> None:
    """Write (or, on a resumed leg, extend) the run record: command, git state, resolved config."""
    if is_rank_zero() and cfg.extras.get("write_run_record"):
        from litlab.runner.run_record import write_run_record

        write_run_record(cfg, folder)


def _seed_and_configure(cfg: DictConfig) -> None:
    import lightning as L
    import torch

    from litlab.core.machine import keep_freed_memory, skip_gpu_probe_on_cpu_machines

    skip_gpu_probe_on_cpu_machines()
    if cfg.extras.get("keep_freed_memory_mb"):
        keep_freed_memory(cfg.extras.keep_freed_memory_mb)
    if cfg.get("seed") is not None:
        L.seed_everything(cfg.seed, workers=True, verbose=False)
    if cfg.extras.get("torch_threads"):
        torch.set_num_threads(cfg.extras.torch_threads)
    if torch.cuda.is_available() and cfg.extras.get("matmul_precision"):
        torch.set_float32_matmul_precision(cfg.extras.matmul_precision)


def build_data_and_model(cfg: DictConfig) -> tuple[L.LightningDataModule, L.LightningModule]:
    """Instantiate ``cfg.data`` and ``cfg.model``, check them against ``litlab.contract`` and bind them.

    Config lists/dicts become Python containers, so hyperparameters saved into checkpoints load under
    ``weights_only=True``.
    """
    import hydra

    from litlab import contract

    datamodule = hydra.utils.instantiate(cfg.data, _convert_="partial")
    model = hydra.utils.instantiate(cfg.model, _convert_="partial")
    contract.check_pair(model, datamodule)
    contract.bind(model, datamodule)
    contract.check_metric(model, cfg.get("optimized_metric"))
    return datamodule, model


def build_trainer(cfg: DictConfig) -> L.Trainer:
    """Instantiate the Trainer with the configured callbacks, loggers and atomic checkpointing."""
    import hydra
    from lightning.pytorch.callbacks import ProgressBar

    from litlab.callbacks.checkpoint_io import AtomicCheckpointIO
    from litlab.callbacks.last_checkpoint import LastCheckpoint
    from litlab.core import slurm
    from litlab.runner.hook_calls import cache_hook_signatures, streamline_hook_calls
    from litlab.runner.instantiate import instantiate_callbacks, instantiate_loggers
    from litlab.runner.metric_logging import skip_redundant_metric_moves

    skip_redundant_metric_moves()
    streamline_hook_calls()
    cache_hook_signatures()
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


def logged_config(cfg: DictConfig) -> dict[str, Any]:
    """The resolved config as loggers record it (without Hydra's own node)."""
    hparams = OmegaConf.to_container(cfg, resolve=True)
    hparams.pop("hydra", None)
    return hparams


def log_hyperparameters(cfg: DictConfig, trainer: L.Trainer, model: L.LightningModule) -> None:
    """Log the resolved config once, with the model's parameter count."""
    if not trainer.loggers:
        return
    hparams = logged_config(cfg)
    hparams["model/params_total"] = sum(p.numel() for p in model.parameters())
    hparams["model/params_trainable"] = sum(p.numel() for p in model.parameters() if p.requires_grad)
    for logger in trainer.loggers:
        logger.log_hyperparams(hparams)


def metric_value(metrics: dict[str, Any], name: str | None) -> float | None:
    """The value of ``optimized_metric`` (an error listing the logged keys when it is missing)."""
    from litlab.core.results import as_float

    if not name:
        return None
    if name not in metrics:
        logged = ", ".join(sorted(metrics)) or "none"
        raise LitlabError(f"optimized_metric={name!r} was not logged; logged metrics are: {logged}")
    return as_float(metrics[name])


def finish_loggers(trainer: L.Trainer | None) -> None:
    """Close wandb runs so that the next multirun job starts a new one."""
    if trainer is None:
        return
    from lightning.pytorch.loggers import WandbLogger

    if any(isinstance(logger, WandbLogger) for logger in trainer.loggers):
        import wandb

        wandb.finish()


def resolve_resume(cfg: DictConfig, output_dir: Path) -> str | None:
    """``resume=auto``: the run folder's last.ckpt if it exists; a path: that path; else None.

    A job that SLURM requeued (SLURM_RESTART_COUNT > 0) resumes as with ``auto`` unless told otherwise.
    The checkpoint is opened and checked first, so a truncated or foreign file is a clear error.
    """
    from litlab.core import slurm

    resume = cfg.get("resume")
    if resume is None and slurm.restart_count() > 0:
        log.info("SLURM restart %d of job %s: resume=auto", slurm.restart_count(), slurm.job_id())
        resume = "auto"
    if resume in (None, False, "none"):
        return None
    if resume == "auto":
        last = output_dir / "checkpoints" / "last.ckpt"
        if not last.exists():
            log.info("resume=auto: no %s yet, starting fresh", last)
            return None
        log.info("resuming from %s", last)
        resume = str(last)
    check_checkpoint(resume, "resume")
    return str(resume)


def check_checkpoint(path: str | Path, key: str = "ckpt_path") -> dict[str, Any]:
    """Open a checkpoint (weights only, memory-mapped) or fail with one line saying what is wrong with it."""
    import torch

    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{key}={path} does not exist; give a .ckpt file from a run's checkpoints/ folder")
    if path.stat().st_size == 0:
        raise ConfigError(f"{key}={path} is empty; it is not a checkpoint (a write was interrupted?)")
    try:
        checkpoint = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except Exception as error:
        raise ConfigError(
            f"{key}={path} is not a readable checkpoint ({type(error).__name__}); it may be truncated or "
            "not a Lightning checkpoint"
        ) from error
    if not isinstance(checkpoint, dict) or "state_dict" not in checkpoint:
        raise ConfigError(f"{key}={path} has no state_dict; it is not a Lightning checkpoint")
    return checkpoint


def forget_metrics_after(trainer: L.Trainer, step: int) -> None:
    """Drop the CSV rows an interrupted leg logged after the checkpoint this leg resumes from."""
    from litlab.loggers import ResumableCSVLogger

    for logger in trainer.loggers:
        if isinstance(logger, ResumableCSVLogger) and trainer.is_global_zero:
            dropped = logger.forget_after(step)
            if dropped:
                log.info(
                    "metrics.csv: dropped %d rows logged after step %d by the interrupted leg", dropped, step
                )


def check_checkpoint_fits(checkpoint: dict[str, Any], model: L.LightningModule, key: str) -> None:
    """Fail before training when a checkpoint's weights do not fit the model (names or shapes)."""
    own = model.state_dict()
    theirs = checkpoint["state_dict"]
    missing = sorted(set(own) - set(theirs))
    unexpected = sorted(set(theirs) - set(own))
    shapes = [k for k in set(own) & set(theirs) if tuple(own[k].shape) != tuple(theirs[k].shape)]
    if missing or unexpected or shapes:
        detail = []
        if missing:
            detail.append(f"missing {', '.join(missing[:3])}{' ...' if len(missing) > 3 else ''}")
        if unexpected:
            detail.append(f"unexpected {', '.join(unexpected[:3])}{' ...' if len(unexpected) > 3 else ''}")
        if shapes:
            k = sorted(shapes)[0]
            detail.append(f"{k} is {tuple(theirs[k].shape)} there, {tuple(own[k].shape)} here")
        raise ConfigError(
            f"{key} does not fit this model ({'; '.join(detail)}); use a checkpoint written by the same "
            "experiment and model config"
        )
