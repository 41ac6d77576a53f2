"""The prepared device script of the sprite claim runs its protocol on a CPU (TRAINER=cpu, tiny EXTRA, one
case) and records each case it ran."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

TINY = (
    "task.seeds=[0] task.classifier_epochs=1 task.max_steps=2 task.early_stopping.every=1 "
    "task.data.grid.image_size=16 task.models.cartanfm.unet_width=8 task.models.fm_only.unet_width=8 "
    "task.models.cartanfm.sample_steps=2 task.models.fm_only.sample_steps=2 extras.torch_threads=1"
)


@pytest.mark.slow  # a litlab-run subprocess: 15-55 s
def test_the_gpu_script_runs_a_case_records_it_and_goes_on_in_the_same_folder(tmp_path: Path) -> None:
    root = Path(__file__).parents[3]
    env = {**os.environ, "TRAINER": "cpu", "CASES": "r2r:0", "EXTRA": TINY, "PYTHON": sys.executable}

    def run_script() -> dict:
        done = subprocess.run(
            ["bash", str(root / "scripts" / "gpu_symspace.sh"), str(tmp_path)],
            env=env,
            cwd=root,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr[-2000:]
        return json.loads((tmp_path / "cases.json").read_text())

    cases = run_script()
    assert list(cases) == ["r2r_case0"] and cases["r2r_case0"]["exit_code"] == 0
    case = tmp_path / "r2r_case0"
    assert "7.02" in (case / "tables" / "paper_vs_ours.csv").read_text()
    runs = (case / "tables" / "runs.csv").read_text()
    assert run_script()["r2r_case0"]["exit_code"] == 0  # a second lease resumes the case's run folder
    assert len((case / "command.txt").read_text().splitlines()) == 2
    assert (case / "tables" / "runs.csv").read_text() == runs  # its saved fits are read back, not refit
