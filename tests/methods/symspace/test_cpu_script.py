"""The 32x32 CPU study script runs its cases in parallel streams, one run folder each, and publishes the
collected table."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from tests.methods.symspace.test_gpu_script import TINY


@pytest.mark.slow  # two litlab-run subprocesses side by side, then the collect task: about 40 s
def test_the_cpu_script_runs_cases_side_by_side_and_publishes_one_table(tmp_path: Path) -> None:
    root = Path(__file__).parents[3]
    env = {
        **os.environ,
        "CASES": "r2r:0 r2e:0",
        "SEEDS": "[0]",
        "EXTRA": TINY,
        "PYTHON": sys.executable,
        "LITLAB_ROOT": str(tmp_path),
        "LITLAB_CACHE": str(tmp_path / "cache"),
    }
    done = subprocess.run(
        ["bash", str(root / "scripts" / "cpu_symspace_32px.sh")],
        env=env,
        cwd=root,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    cases = tmp_path / "outputs" / "task" / "symspace" / "sprite_claim_32px"
    assert (cases / "r2r_case0" / "tables" / "runs.csv").is_file()
    assert (cases / "r2e_case0" / "tables" / "runs.csv").is_file()
    published = tmp_path / "results" / "symspace" / "sprite_claim_32px" / "tables"
    runs = pd.read_csv(published / "runs.csv")
    assert sorted(set(runs["split"])) == ["r2e", "r2r"]
    assert "7.02" in (published / "paper_vs_ours.csv").read_text()
