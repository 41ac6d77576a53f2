"""One `resources` block drives Trainer and SLURM; SLURM facts; launch checks; resume after a requeue."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch
from hydra import compose, initialize_config_module
from hydra.core.global_hydra import GlobalHydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from lightning.fabric.plugins.environments import SLURMEnvironment
from omegaconf import DictConfig, open_dict

from litlab.core import slurm
from litlab.runner import experiment as exp
from litlab.runner.resolvers import default_run_id

SLURM_VARS = (
    "SLURM_JOB_ID",
    "SLURM_NTASKS",
    "SLURM_NTASKS_PER_NODE",
    "SLURM_JOB_NAME",
    "SLURM_RESTART_COUNT",
    "MASTER_ADDR",
    "LITLAB_RUN_ID",
    "WANDB_SWEEP_ID",
    "WANDB_RUN_ID",
    "SLURM_ARRAY_TASK_ID",
)


@pytest.fixture(autouse=True)
def no_slurm_job(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test starts outside any SLURM job, whatever shell ran pytest, and leaves none behind.

    set_master_addr writes os.environ itself; setenv first records the variable's original state, so
    teardown restores it whatever the code under test wrote.
    """
    for name in [*SLURM_VARS, "SLURM_JOB_NODELIST", "SLURM_NODELIST", "SLURM_ARRAY_JOB_ID"]:
        monkeypatch.setenv(name, "")
        monkeypatch.delenv(name)


def in_job(monkeypatch: pytest.MonkeyPatch, **extra: str) -> None:
    job = {"SLURM_JOB_ID": "41", "SLURM_NTASKS": "2", "SLURM_NTASKS_PER_NODE": "2", "SLURM_JOB_NAME": "train"}
    for name, value in {**job, **extra}.items():
        monkeypatch.setenv(name, value)


def composed(overrides: list[str], mode: RunMode = RunMode.RUN) -> DictConfig:
    """The train config with its hydra node (launcher) and HydraConfig set as in a run of ``mode``."""
    GlobalHydra.instance().clear()
    with initialize_config_module(config_module="litlab.configs", version_base="1.3"):
        cfg = compose("train", overrides=overrides, return_hydra_config=True)
    with open_dict(cfg):
        cfg.hydra.mode = mode
        cfg.hydra.runtime.output_dir = "/tmp/unused"
        cfg.hydra.job.num = 0
    HydraConfig.instance().set_config(cfg)
    return cfg


@pytest.mark.parametrize(
    ("trainer", "gpus"),
    [("ddp", 8), ("fsdp", 8), ("gpu", 8), ("ddp_cpu", None), ("cpu", None)],
)
def test_resources_set_trainer_and_slurm_in_one_place(trainer: str, gpus: int | None) -> None:
    cfg = composed([f"trainer={trainer}", "hydra/launcher=slurm", "resources.nodes=4", "resources.devices=8"])
    launcher = cfg.hydra.launcher
    assert (cfg.trainer.num_nodes, cfg.trainer.devices) == (4, 8)
    assert (launcher.nodes, launcher.tasks_per_node, launcher.gpus_per_node) == (4, 8, gpus)
    assert launcher.timeout_min == cfg.resources.timeout_min
    assert launcher.additional_parameters.requeue is True


def test_ddp_cpu_defaults_to_two_processes() -> None:
    cfg = composed(["trainer=ddp_cpu"])
    assert (cfg.trainer.strategy, cfg.trainer.accelerator, cfg.trainer.devices) == ("ddp", "cpu", 2)
    assert cfg.resources.devices == 2


def test_local_multirun_with_ddp_is_refused_but_slurm_and_single_device_are_not(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with pytest.raises(SystemExit, match="re-launches the whole sweep.*hydra/launcher=slurm"):
        exp.check_launch(composed(["trainer=ddp_cpu"], RunMode.MULTIRUN))
    with pytest.raises(SystemExit, match="re-launches the whole sweep"):
        exp.check_launch(
            composed(
                ["trainer=ddp", "resources.devices=2", "hydra/launcher=submitit_local"], RunMode.MULTIRUN
            )
        )
    with pytest.raises(SystemExit, match="resources.devices=1"):
        exp.check_launch(composed(["trainer=cpu", "resources.devices=2"], RunMode.MULTIRUN))
    exp.check_launch(composed(["trainer=cpu"], RunMode.MULTIRUN))
    exp.check_launch(
        composed(["trainer=cpu", "resources.devices=2", "+trainer.strategy=ddp_spawn"], RunMode.MULTIRUN)
    )
    exp.check_launch(composed(["trainer=ddp_cpu"], RunMode.RUN))
    in_job(monkeypatch)
    exp.check_launch(composed(["trainer=ddp_cpu", "hydra/launcher=slurm"], RunMode.MULTIRUN))


def test_cluster_environment_only_inside_a_job_and_without_lightning_requeue(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert slurm.cluster_environment() is None
    in_job(monkeypatch, MASTER_ADDR="10.0.0.7")
    environment = slurm.cluster_environment()
    assert isinstance(environment, SLURMEnvironment) and environment.auto_requeue is False
    assert environment.main_address == "10.0.0.7", "a MASTER_ADDR the user set is kept"
    monkeypatch.setenv("SLURM_JOB_NAME", "interactive")
    assert slurm.cluster_environment() is None, "salloc shells are not jobs to join"


def test_master_addr_is_the_first_node_or_its_node_addr(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    in_job(monkeypatch, SLURM_JOB_NODELIST="localhost,n9")
    assert slurm.set_master_addr() == "localhost", "a resolvable first node is used as is"
    del os.environ["MASTER_ADDR"]
    fake = tmp_path / "scontrol"
    fake.write_text(
        '#!/bin/sh\necho "NodeName=$3 Arch=x86_64"\necho "   NodeAddr=127.0.0.9 NodeHostName=$3"\n'
    )
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("SLURM_JOB_NODELIST", "litlab-no-such-node[3-4]")
    assert slurm.set_master_addr() == "127.0.0.9", "an unresolvable name falls back to scontrol's NodeAddr"


def test_job_id_names_the_array_task(monkeypatch: pytest.MonkeyPatch) -> None:
    in_job(monkeypatch)
    assert slurm.job_id() == "41"
    monkeypatch.setenv("SLURM_ARRAY_JOB_ID", "40")
    monkeypatch.setenv("SLURM_ARRAY_TASK_ID", "1")
    assert slurm.job_id() == "40_1"


def test_a_requeued_job_resumes_automatically(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    cfg = composed([])
    (tmp_path / "checkpoints").mkdir()
    torch.save({"state_dict": {}}, tmp_path / "checkpoints" / "last.ckpt")
    assert exp.resolve_resume(cfg, tmp_path) is None, "a first run starts fresh"
    in_job(monkeypatch, SLURM_RESTART_COUNT="1")
    assert exp.resolve_resume(cfg, tmp_path) == str(tmp_path / "checkpoints" / "last.ckpt")
    with open_dict(cfg):
        cfg.resume = "none"
    assert exp.resolve_resume(cfg, tmp_path) is None, "an explicit resume=none wins"


def test_run_id_follows_the_wandb_run_then_the_slurm_job(monkeypatch: pytest.MonkeyPatch) -> None:
    in_job(monkeypatch)
    assert default_run_id() == "41"
    del os.environ["LITLAB_RUN_ID"]
    monkeypatch.setenv("WANDB_SWEEP_ID", "sweep7")
    monkeypatch.setenv("WANDB_RUN_ID", "run3")
    assert default_run_id() == "run3", "inside a wandb agent the folder is the wandb run's"
    assert os.environ["LITLAB_RUN_ID"] == "run3", "kept for DDP children"
