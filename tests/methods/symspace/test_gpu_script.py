"""The prepared device script of the sprite claim runs its protocol on a CPU (TRAINER=cpu, tiny EXTRA, one
case) and records each case it ran; by default it runs all six cases at 64x64."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.methods.symspace.script_runs import TINY, fake_python, run_script


@pytest.mark.slow  # a litlab-run subprocess: 15-55 s
def test_the_gpu_script_runs_a_case_records_it_and_goes_on_in_the_same_folder(tmp_path: Path) -> None:
    def run_once() -> dict:
        env = {"TRAINER": "cpu", "CASES": "r2r:0", "EXTRA": TINY, "PYTHON": sys.executable}
        done = run_script("gpu_symspace.sh", str(tmp_path), **env)
        assert done.returncode == 0, done.stderr[-2000:]
        return json.loads((tmp_path / "cases.json").read_text())

    cases = run_once()
    assert list(cases) == ["r2r_case0"] and cases["r2r_case0"]["exit_code"] == 0
    case = tmp_path / "r2r_case0"
    assert "7.02" in (case / "tables" / "paper_vs_ours.csv").read_text()
    runs = (case / "tables" / "runs.csv").read_text()
    assert run_once()["r2r_case0"]["exit_code"] == 0  # a second lease resumes the case's run folder
    assert len((case / "command.txt").read_text().splitlines()) == 2
    assert (case / "tables" / "runs.csv").read_text() == runs  # its saved fits are read back, not refit


def test_the_gpu_script_by_default_runs_all_six_cases_at_64px(tmp_path: Path) -> None:
    stub, calls = fake_python(tmp_path)
    out = tmp_path / "out"
    unset = ("EXTRA", "CASES", "STEPS")
    done = run_script("gpu_symspace.sh", str(out), unset=unset, TRAINER="cpu", PYTHON=str(stub))
    assert done.returncode == 0, done.stderr[-2000:]
    runs = calls.read_text().splitlines()
    assert len(runs) == 6 and all("task.data.grid.image_size=64" in run for run in runs)
    cases = json.loads((out / "cases.json").read_text())
    assert list(cases) == [f"{split}_case{case}" for split in ("r2r", "r2e") for case in range(3)]
    assert all(case["exit_code"] == 0 for case in cases.values())
