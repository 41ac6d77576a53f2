"""The 32x32 CPU study script runs its cases in parallel streams, one run folder each, seed-major, and
publishes the collected table."""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd
import pytest

from tests.methods.symspace.script_runs import TINY, fake_python, run_script

OPTIONAL = ("EXTRA", "CASES", "SEEDS", "STEPS", "STREAMS", "THREADS", "MODELS")


@pytest.mark.slow  # two litlab-run subprocesses side by side, then the collect task: about 20-40 s
def test_the_cpu_script_runs_cases_side_by_side_and_publishes_one_table(tmp_path: Path) -> None:
    done = run_script(
        "cpu_symspace_32px.sh",
        CASES="r2r:0 r2e:0",
        SEEDS="[0]",
        EXTRA=TINY,
        PYTHON=sys.executable,
        LITLAB_ROOT=str(tmp_path),
        LITLAB_CACHE=str(tmp_path / "cache"),
    )
    assert done.returncode == 0, done.stderr[-2000:]
    cases = tmp_path / "outputs" / "task" / "symspace" / "sprite_claim_32px"
    assert (cases / "r2r_case0" / "tables" / "runs.csv").is_file()
    assert (cases / "r2e_case0" / "tables" / "runs.csv").is_file()
    kept = tmp_path / "results" / "symspace" / "sprite_claim_32px_study" / "fits"  # committed, outside runs
    assert (kept / "r2r_case0" / "cartanfm_seed0.json").is_file()
    assert not (cases / "r2r_case0" / "fits").exists()
    published = tmp_path / "results" / "symspace" / "sprite_claim_32px" / "tables"
    runs = pd.read_csv(published / "runs.csv")
    assert sorted(set(runs["split"])) == ["r2e", "r2r"]
    assert "7.02" in (published / "paper_vs_ours.csv").read_text()


def test_the_cpu_script_by_default_runs_all_six_cases_seed_major_then_collects_them(tmp_path: Path) -> None:
    stub, calls = fake_python(tmp_path)
    done = run_script("cpu_symspace_32px.sh", unset=OPTIONAL, PYTHON=str(stub), LITLAB_ROOT=str(tmp_path))
    assert done.returncode == 0, done.stderr[-2000:]
    *runs, collect = calls.read_text().splitlines()
    assert len(runs) == 6 * 3 and all("task.max_steps=20000" in run and "resume=auto" in run for run in runs)
    kept = tmp_path / "results" / "symspace" / "sprite_claim_32px_study" / "fits"
    assert all(f"task.fits_dir={kept} " in run and "extras.torch_threads=1 " in run for run in runs)
    assert not any("task.fit_only" in run for run in runs)
    seeds_per_case: dict[str, list[str]] = {}
    for run in runs:
        args = dict(arg.split("=", 1) for arg in run.split()[2:])
        seeds_per_case.setdefault(args["run_id"], []).append(args["task.seeds"])
    assert seeds_per_case == {
        f"{split}_case{case}": ["[0]", "[0,1]", "[0,1,2]"] for split in ("r2r", "r2e") for case in range(3)
    }
    folders = tmp_path / "outputs" / "task" / "symspace" / "sprite_claim_32px"
    assert "task=symspace/sprite_claim_collect" in collect and "publish=true" in collect
    assert collect.count(str(folders)) == 6


def test_the_cpu_script_can_fit_only_some_models_on_more_threads_and_then_collects_nothing(
    tmp_path: Path,
) -> None:
    stub, calls = fake_python(tmp_path)
    env = {"MODELS": "vae,fm_only", "THREADS": "2", "STREAMS": "1", "CASES": "r2r:1", "SEEDS": "[1]"}
    done = run_script(
        "cpu_symspace_32px.sh", unset=OPTIONAL, PYTHON=str(stub), LITLAB_ROOT=str(tmp_path), **env
    )
    assert done.returncode == 0, done.stderr[-2000:]
    (run,) = calls.read_text().splitlines()  # no collect task
    assert "task.fit_only=[vae,fm_only]" in run.split() and "extras.torch_threads=2" in run.split()
    assert "fitted only vae,fm_only" in done.stdout
