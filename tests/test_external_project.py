"""A user's own package (examples/external_project) runs with litlab's features, found three ways."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import run_cli

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "examples" / "external_project"
SHORT = ["trainer.max_epochs=4", "extras.print_config=false"]


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The example installed (with its entry point) into a folder of its own, as `pip install` would."""
    target, source = tmp_path_factory.mktemp("site"), tmp_path_factory.mktemp("source") / "mylab"
    shutil.copytree(EXAMPLE, source, ignore=shutil.ignore_patterns("*.egg-info", "build", "__pycache__"))
    command = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation"]
    build = subprocess.run([*command, "--target", str(target), str(source)], capture_output=True, text=True)
    assert build.returncode == 0, build.stderr[-2000:]
    return target


def _results(cwd: Path, experiment: str, run_id: str) -> dict:
    return json.loads((cwd / "outputs" / experiment / run_id / "results.json").read_text())


def test_installed_package_is_found_through_its_entry_point(installed: Path, tmp_path: Path) -> None:
    env = {"PYTHONPATH": str(installed)}
    result = run_cli(["litlab-train", "experiment=mine", *SHORT, "run_id=a"], tmp_path, env=env)
    assert result.returncode == 0, result.stderr[-2000:]
    assert _results(tmp_path, "mine", "a")["optimized_metric"] == "test/mse"
    assert (tmp_path / "outputs" / "mine" / "a" / "plots" / "test_prediction.png").exists()
    resumed = run_cli(
        ["litlab-train", "experiment=mine", "trainer.max_epochs=8", "run_id=a", "resume=auto"],
        tmp_path,
        env=env,
    )
    assert resumed.returncode == 0 and "resuming from" in resumed.stdout + resumed.stderr
    listing = run_cli(["litlab-train", "--help"], tmp_path, env=env).stdout
    yours = listing.split("(yours, from the config search path)")[1].split("==")[0]
    assert "experiment=mine\n" in yours and "experiment=mine_wide\n" in yours
    assert "experiment=kan/function_fit" not in yours


@pytest.mark.parametrize(
    "how",
    [
        "environment",
        pytest.param("searchpath_pkg", marks=pytest.mark.slow),
        pytest.param("searchpath_file", marks=pytest.mark.slow),
    ],
)
def test_configs_found_without_installing(how: str, tmp_path: Path) -> None:
    configs = EXAMPLE / "src" / "mylab" / "configs"
    env = {"PYTHONPATH": str(EXAMPLE / "src")}
    args = ["litlab-train", "experiment=mine_wide", *SHORT, "run_id=b"]
    if how == "searchpath_pkg":
        args.append("hydra.searchpath=[pkg://mylab.configs]")
    elif how == "searchpath_file":
        args.append(f"hydra.searchpath=[file://{configs}]")
    else:
        env["LITLAB_CONFIG_PATH"] = str(configs)
    result = run_cli(args, tmp_path, env=env)
    assert result.returncode == 0, result.stderr[-2000:]
    assert 0 < _results(tmp_path, "mine_wide", "b")["value"] < 1


def test_unknown_without_the_search_path_lists_what_exists(tmp_path: Path) -> None:
    result = run_cli(["litlab-train", "experiment=mine"], tmp_path, env={"PYTHONPATH": str(EXAMPLE / "src")})
    assert result.returncode == 2 and "unknown experiment 'mine'" in result.stderr


@pytest.mark.slow
def test_two_trial_optuna_sweep(installed: Path, tmp_path: Path) -> None:
    args = ["litlab-train", "-m", "experiment=mine", "hparams_search=mylab/optuna", *SHORT, "run_id=opt"]
    result = run_cli(args, tmp_path, env={"PYTHONPATH": str(installed)}, timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    sweep = tmp_path / "outputs" / "mine" / "multirun" / "opt"
    assert sorted(p.name for p in sweep.iterdir() if (p / "results.json").exists()) == ["0", "1"]
    assert (sweep / "optimization_results.yaml").exists()


@pytest.mark.slow
def test_the_example_own_tests_pass(installed: Path, tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(installed), "WANDB_MODE": "disabled"}
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(EXAMPLE / "tests")]
    result = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout[-3000:]


@pytest.mark.slow
@pytest.mark.timeout(420)
def test_runs_on_slurm_through_the_launcher(installed: Path, slurm: dict, tmp_path: Path) -> None:
    args = [
        "litlab-train",
        "-m",
        "hydra/launcher=slurm",
        "resources.cpus_per_task=1",
        "resources.timeout_min=5",
    ]
    env = {**slurm, "PYTHONPATH": str(installed)}
    result = run_cli([*args, "experiment=mine", *SHORT, "run_id=s"], tmp_path, timeout=400, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    run_dir = tmp_path / "outputs" / "mine" / "multirun" / "s" / "0"
    logs = "\n".join(p.read_text() for p in sorted((run_dir.parent / ".submitit").glob("*/*_log.*")))
    assert "slurm job" in logs, "the job ran inside SLURM"
    assert 0 < json.loads((run_dir / "results.json").read_text())["value"] < 1
