"""Shared fixtures: compose packaged configs in-process, and run console scripts in a subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
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


def run_cli(
    args: list[str], cwd: Path, timeout: int = 300, env: dict | None = None
) -> subprocess.CompletedProcess:
    """Run an installed console script (``litlab-train`` ...) and capture its output."""
    full_env = {**os.environ, "PYTHONWARNINGS": "ignore", "WANDB_MODE": "disabled", **(env or {})}
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
