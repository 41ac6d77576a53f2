"""The Fitter on two processes (DDP on CPU): every rank collects what it logs, so each sees the metrics
averaged over ranks (and early stopping monitors them), a checkpointed fit continues to the same end, and a
task runs under ``trainer=ddp_cpu``."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import run_cli

SCRIPT = Path(__file__).with_name("fitter_ddp_fit.py")


def _fit(out: Path, max_steps: int, checkpoint: Path | None = None) -> list[dict]:
    """Run the two-process fit; the report of each rank."""
    args = [sys.executable, str(SCRIPT), str(out), str(max_steps)] + ([str(checkpoint)] if checkpoint else [])
    done = subprocess.run(args, capture_output=True, text=True, timeout=300, cwd=out.parent)
    assert done.returncode == 0, done.stderr[-3000:]
    return [json.loads(out.with_name(f"{out.stem}.rank{rank}{out.suffix}").read_text()) for rank in (0, 1)]


@pytest.mark.slow  # two process groups of two processes: 20-40 s
def test_a_ddp_fit_averages_metrics_over_ranks_and_continues_from_its_checkpoint(tmp_path: Path) -> None:
    whole = _fit(tmp_path / "whole.json", 12)
    assert whole[0]["history"] == whole[1]["history"]  # each rank has the means over both ranks
    assert [row["step"] for row in whole[0]["history"]] == [4, 8, 12]
    assert all("val/loss" in row and "train/loss" in row for row in whole[0]["history"])
    checkpoint = tmp_path / "fit.ckpt"
    _fit(tmp_path / "first.json", 8, checkpoint)
    legs = _fit(tmp_path / "legs.json", 12, checkpoint)
    for rank in (0, 1):
        assert legs[rank]["steps"] == 12 and legs[rank]["weights"] == whole[rank]["weights"]
        assert legs[rank]["history"] == whole[rank]["history"]


@pytest.mark.slow  # a litlab-run on two processes: 20-40 s
def test_a_task_runs_on_two_processes_through_the_trainer_config(tmp_path: Path) -> None:
    args = ["litlab-run", "task=kan/ntk", "trainer=ddp_cpu", "task.epochs=20", "task.eval_epochs=[0,10,20]"]
    # 180 s: with metrics collected on rank 0 only, this run hung in the Fitter's all-reduce
    done = run_cli([*args, "run_id=ddp", "extras.torch_threads=1"], tmp_path, timeout=180)
    assert done.returncode == 0, done.stderr[-3000:]
    run = tmp_path / "outputs" / "task" / "kan" / "ntk" / "ddp"
    metrics = json.loads((run / "results.json").read_text())["metrics"]
    assert "glorot/train_loss" in metrics and all(math.isfinite(v) for v in metrics.values())
    assert (run / "train_ddp_process_1.log").exists()  # the second process ran the fits too
