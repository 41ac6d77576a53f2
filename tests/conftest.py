"""Shared fixtures: compose packaged configs in-process, and run console scripts in a subprocess."""

from __future__ import annotations

import getpass
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from importlib import resources
from pathlib import Path

import pytest
import torch
from hydra import compose, initialize_config_module
from hydra.core.global_hydra import GlobalHydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, open_dict
from transformers import PreTrainedTokenizerBase

from litlab.datamodules.text import text_file
from litlab.datamodules.tokenizers import cached_bpe
from litlab.runner.resolvers import register_hydra_extensions

register_hydra_extensions()

# Test-sized tensors run fastest on one thread, and one thread per process keeps a 2-core CI honest.
torch.set_num_threads(1)

CONFIGS = resources.files("litlab.configs")
CLUSTER = Path(__file__).resolve().parents[1] / "scripts" / "slurm" / "cluster.sh"
BIN = Path(sys.executable).parent


def experiment_names() -> list[str]:
    """Every ``configs/experiment/<paper>/<name>.yaml`` as ``<paper>/<name>``."""
    root = Path(str(CONFIGS)) / "experiment"
    return sorted(str(p.relative_to(root).with_suffix("")) for p in root.rglob("*.yaml"))


def task_names() -> list[str]:
    root = Path(str(CONFIGS)) / "task"
    return sorted(str(p.relative_to(root).with_suffix("")) for p in root.rglob("*.yaml"))


@pytest.fixture
def compose_config(tmp_path: Path) -> Callable[..., DictConfig]:
    """Compose ``config_name`` with overrides, run folder in tmp_path, HydraConfig set as in a run."""

    def _compose(config_name: str = "train", overrides: list[str] | None = None) -> DictConfig:
        GlobalHydra.instance().clear()
        with initialize_config_module(config_module="litlab.configs", version_base="1.3"):
            cfg = compose(config_name, overrides=list(overrides or []), return_hydra_config=True)
        with open_dict(cfg):
            cfg.hydra.runtime.output_dir = str(tmp_path)
            cfg.hydra.runtime.cwd = str(tmp_path)
            cfg.hydra.job.num = 0
            cfg.hydra.job.id = "test"
        HydraConfig.instance().set_config(cfg)
        with open_dict(cfg):
            cfg.paths.output_dir = str(tmp_path)
            cfg.paths.log_dir = str(tmp_path / "outputs")
            cfg.extras.print_config = False
            del cfg["hydra"]
        return cfg

    yield _compose
    GlobalHydra.instance().clear()


def task_run_config(compose_config: Callable[..., DictConfig], task: str, *overrides: str) -> DictConfig:
    """litlab-run's config with ``task`` (a dotted path to a task callable) in place of a configured task."""
    cfg = compose_config("run", ["task=kan/ntk", *overrides])
    with open_dict(cfg):
        cfg.task = {"_target_": task, "_partial_": True}
    return cfg


def run_cli(
    args: list[str], cwd: Path, timeout: int = 300, env: dict | None = None
) -> subprocess.CompletedProcess:
    """Run an installed console script (``litlab-train`` ...) at one thread and capture its output.

    One thread, as in this process: torch's default (one per core) spin-waits when a shared 2-core machine
    is busy, which made a 20 s default run take minutes under load.
    """
    quiet = {"PYTHONWARNINGS": "ignore", "WANDB_MODE": "disabled", "OMP_NUM_THREADS": "1"}
    full_env = {**os.environ, **quiet, **(env or {})}
    full_env.pop("LITLAB_RUN_ID", None)
    return subprocess.run(
        [str(BIN / args[0]), *args[1:]],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=full_env,
    )


@pytest.fixture(scope="session")
def shakespeare() -> str:
    """The first 200 kB of tinyshakespeare."""
    return text_file("tinyshakespeare").read_text(encoding="utf-8")[:200_000]


@pytest.fixture(scope="session")
def lm_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A cache folder shared by the session (tokenizers are trained once)."""
    return tmp_path_factory.mktemp("litlab_cache")


@pytest.fixture(scope="session")
def tokenizer(shakespeare: str, lm_cache: Path) -> PreTrainedTokenizerBase:
    """A 600-id byte-level BPE trained on the shakespeare slice."""
    return cached_bpe([shakespeare], 600, lm_cache)


def _cluster_up(conf: Path) -> bool:
    if not conf.exists() or shutil.which("sinfo") is None:
        return False
    probe = subprocess.run(
        ["sinfo", "-h", "-N", "-o", "%N %T"],
        capture_output=True,
        text=True,
        timeout=20,
        env={**os.environ, "SLURM_CONF": str(conf)},
    )
    states = dict(line.split() for line in probe.stdout.splitlines() if len(line.split()) == 2)
    return probe.returncode == 0 and all(
        states.get(n, "").startswith(("idle", "mix", "alloc")) for n in ("n1", "n2")
    )


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test that uses the SLURM cluster ``slurm``: ``make test`` runs those in one process after
    the parallel run (they share one cluster, and each cancels the user's jobs when it ends)."""
    for item in items:
        if {"slurm", "slurm_cluster"} & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slurm)


@pytest.fixture(scope="session")
def slurm_cluster() -> Iterator[dict[str, str]]:
    """``{"SLURM_CONF": ...}`` of the two-node cluster: the one CI started, or one started here.

    Skips (with the reason) only where slurm cannot be installed or started: not root, no apt-get,
    no packages. With LITLAB_REQUIRE_SLURM=1 (set by .ci/run) those fail instead.
    """
    state = Path(os.environ.get("LITLAB_SLURM_DIR", "/tmp/litlab-slurm"))
    conf = state / "slurm.conf"
    env = {"SLURM_CONF": str(conf)}
    if _cluster_up(conf):
        yield env
        return
    started = subprocess.run(["bash", str(CLUSTER), "start"], capture_output=True, text=True, timeout=900)
    if started.returncode != 0:
        reason = f"no SLURM cluster: scripts/slurm/cluster.sh start failed: {started.stderr.strip()[-600:]}"
        if os.environ.get("LITLAB_REQUIRE_SLURM") == "1":
            pytest.fail(reason)
        pytest.skip(reason)
    try:
        yield env
    finally:
        subprocess.run(["bash", str(CLUSTER), "stop"], capture_output=True, timeout=120)


@pytest.fixture
def slurm(slurm_cluster: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, str]]:
    """The cluster for one test; cancels whatever that test left queued or running."""
    monkeypatch.setenv("SLURM_CONF", slurm_cluster["SLURM_CONF"])
    yield slurm_cluster
    subprocess.run(["scancel", "--user", getpass.getuser()], capture_output=True, timeout=30)
