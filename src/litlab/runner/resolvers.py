"""OmegaConf resolvers of the packaged configs; each entry point calls ``register_hydra_extensions``."""

from __future__ import annotations

import os
import secrets
import time
from pathlib import Path

from omegaconf import OmegaConf

RUN_ID_ENV = "LITLAB_RUN_ID"


def default_run_id() -> str:
    """The wandb run id inside a wandb sweep agent, else the SLURM job id (array-aware), else a unique
    timestamp (to the second, plus a random suffix, so two runs started together never share a folder).

    The id is stored in the environment so DDP children, which re-run the entry point, resolve the same
    id as their parent. Inside an agent the folder follows the wandb run, not the SLURM job: a requeued
    agent job gets a new run (new parameters) and so a new folder, while a run wandb hands out again
    after preemption finds its own folder (and last.ckpt) again.
    """
    if RUN_ID_ENV in os.environ:
        return os.environ[RUN_ID_ENV]
    array_job, array_task = os.environ.get("SLURM_ARRAY_JOB_ID"), os.environ.get("SLURM_ARRAY_TASK_ID")
    if os.environ.get("WANDB_SWEEP_ID") and os.environ.get("WANDB_RUN_ID"):
        run_id = os.environ["WANDB_RUN_ID"]
    elif array_job and array_task:
        run_id = f"{array_job}_{array_task}"
    elif os.environ.get("SLURM_JOB_ID"):
        run_id = os.environ["SLURM_JOB_ID"]
    else:
        run_id = f"{time.strftime('%Y-%m-%d_%H-%M-%S')}_{secrets.token_hex(2)}"
    os.environ[RUN_ID_ENV] = run_id
    return run_id


def wandb_offline() -> bool:
    """Log to wandb online only when the user has credentials (an API key or a ~/.netrc entry)."""
    if os.environ.get("WANDB_MODE") in {"offline", "disabled"}:
        return True
    if os.environ.get("WANDB_API_KEY"):
        return False
    netrc = Path.home() / ".netrc"
    return not (netrc.exists() and "api.wandb.ai" in netrc.read_text(errors="ignore"))


def gpus_per_node(accelerator: str, devices: int | str) -> int | None:
    """GPUs to request per SLURM node: ``devices`` for a GPU accelerator, else None (no --gpus flag)."""
    if str(accelerator).lower() not in {"gpu", "cuda"}:
        return None
    return int(devices)


def register_hydra_extensions() -> None:
    """Register the ``litlab.*`` resolvers and the user config search path plugin; safe to repeat.

    The plugin is registered by hand as well as found by Hydra's scan of ``hydra_plugins``, because
    an editable install's import hook hides namespace packages from that scan.
    """
    from hydra.core.plugins import Plugins

    from hydra_plugins.litlab_searchpath import LitlabSearchPathPlugin

    Plugins.instance().register(LitlabSearchPathPlugin)
    for name, fn in {
        "litlab.run_id": default_run_id,
        "litlab.wandb_offline": wandb_offline,
        "litlab.gpus_per_node": gpus_per_node,
        "litlab.cwd": os.getcwd,
    }.items():
        if not OmegaConf.has_resolver(name):
            OmegaConf.register_new_resolver(name, fn, use_cache=True)
