"""The Fitter on two processes (DDP on CPU): every rank collects what it logs, so each sees the metrics
averaged over ranks (and early stopping monitors them), and a checkpointed fit continues to the same end."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

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
