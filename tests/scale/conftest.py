"""Fixtures for the scale tests: the KAN workload, an uninterrupted reference run, the SLURM cluster."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from tests.conftest import BIN, run_cli

# The workload every scale test runs: experiment=kan/function_fit made small and deterministic
# (one thread, no plots, no progress bar), 600 full-batch steps with last.ckpt every 50 of them; one step
# per epoch, so that trainer.max_epochs counts steps and kills land between epochs as often as within.
WORKLOAD = [
    "experiment=kan/function_fit",
    "data.steps_per_epoch=1",
    "data.n_samples=400",
    "data.grid_resolution=20",
    "trainer.check_val_every_n_epoch=100",
    "trainer.deterministic=true",
    "extras.torch_threads=1",
    "extras.print_config=false",
    "+trainer.enable_progress_bar=false",
    "callbacks.rich_progress_bar=null",
    "callbacks.figures=null",
]
EPOCHS = ["trainer.max_epochs=600", "callbacks.last_checkpoint.every_n_train_steps=50"]
RUNS = Path("outputs") / "kan" / "function_fit"


def cli_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment run_cli uses (no inherited run id, wandb off), plus ``extra``."""
    env = {**os.environ, "PYTHONWARNINGS": "ignore", "WANDB_MODE": "disabled", **(extra or {})}
    env.pop("LITLAB_RUN_ID", None)
    return env


def start_cli(args: list[str], cwd: Path, env: dict[str, str] | None = None) -> subprocess.Popen:
    """Start a console script in the background (its output goes to files in ``cwd``)."""
    name = args[0]
    return subprocess.Popen(
        [str(BIN / name), *args[1:]],
        cwd=cwd,
        env=cli_env(env),
        stdout=open(cwd / f"{name}.out", "w"),  # noqa: SIM115 (closed with the process)
        stderr=open(cwd / f"{name}.err", "w"),  # noqa: SIM115
        text=True,
    )


def wait_for(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.05)


def checkpoint_state(run_dir: Path) -> dict:
    """Weights and optimizer state of ``<run_dir>/checkpoints/last.ckpt``."""
    ckpt = torch.load(run_dir / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=True)
    return {
        "state_dict": ckpt["state_dict"],
        "optimizer": ckpt["optimizer_states"],
        "step": ckpt["global_step"],
    }


def assert_identical_state(a: dict, b: dict) -> None:
    assert a["step"] == b["step"]
    assert a["state_dict"].keys() == b["state_dict"].keys()
    for name, tensor in a["state_dict"].items():
        assert torch.equal(tensor, b["state_dict"][name]), f"{name} differs"
    for state_a, state_b in zip(a["optimizer"][0]["state"].values(), b["optimizer"][0]["state"].values()):
        for key, value in state_a.items():
            assert torch.equal(torch.as_tensor(value), torch.as_tensor(state_b[key])), f"Adam {key} differs"


def max_weight_difference(a: dict, b: dict) -> float:
    return max((a["state_dict"][k] - b["state_dict"][k]).abs().max().item() for k in a["state_dict"])


def metric_rows(run_dir: Path) -> list[dict[str, str]]:
    with open(run_dir / "csv" / "metrics.csv") as handle:
        return list(csv.DictReader(handle))


def results(run_dir: Path) -> dict:
    return json.loads((run_dir / "results.json").read_text())


@pytest.fixture(scope="session")
def reference_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The workload run once, uninterrupted, in one process: what every other leg must reproduce."""
    cwd = tmp_path_factory.mktemp("reference")
    result = run_cli(["litlab-train", *WORKLOAD, *EPOCHS, "run_id=reference"], cwd, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    return cwd / RUNS / "reference"


def stop(process: subprocess.Popen, timeout: float) -> int:
    """Wait for ``process``; kill it (and fail) if it outlives ``timeout``."""
    try:
        return process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.send_signal(signal.SIGKILL)
        process.wait()
        raise AssertionError(f"{process.args[0]} did not finish within {timeout:.0f} s") from None
