"""The console scripts as a user runs them: default run, help, bad input, resume, eval."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from tests.conftest import run_cli

FAST = [
    "trainer.max_epochs=20",
    "data.steps_per_epoch=1",
    "data.n_samples=400",
    "data.grid_resolution=20",
    "extras.print_config=false",
]


def _metrics_rows(run_dir: Path) -> list[dict[str, str]]:
    with open(run_dir / "csv" / "metrics.csv") as handle:
        return list(csv.DictReader(handle))


@pytest.mark.slow
def test_default_run_with_no_arguments(tmp_path: Path) -> None:
    result = run_cli(["litlab-train"], tmp_path, timeout=900)
    assert result.returncode == 0, result.stderr[-2000:]
    run_dir = next((tmp_path / "outputs" / "kan" / "function_fit").iterdir())
    for line in ("run folder:", "metrics:", "checkpoint:", "plots:", "test/rel_l2 ="):
        assert line in result.stdout
    for name in ("config_resolved.yaml", "command.txt", "git.txt", "results.json", "checkpoints/last.ckpt"):
        assert (run_dir / name).exists(), name
    assert (run_dir / "plots" / "test_prediction.png").exists()
    assert json.loads((run_dir / "results.json").read_text())["value"] < 0.1


def test_help_lists_experiments(tmp_path: Path) -> None:
    result = run_cli(["litlab-train", "--help"], tmp_path)
    assert result.returncode == 0
    for name in ("experiment=kan/function_fit", "experiment=kan/feynman", "task=kan/ntk"):
        assert f"  {name}\n" in result.stdout


def test_unknown_experiment_lists_the_available_ones(tmp_path: Path) -> None:
    result = run_cli(["litlab-train", "experiment=kan/nope"], tmp_path)
    assert result.returncode != 0
    assert "unknown experiment 'kan/nope'" in result.stderr
    assert "  experiment=kan/function_fit\n" in result.stderr


def test_bad_override_is_one_clear_error(tmp_path: Path) -> None:
    result = run_cli(["litlab-train", "trainer.max_epoch=3"], tmp_path)
    assert result.returncode != 0
    assert (
        "trainer.max_epoch is not a key" in result.stderr
        and "Did you mean trainer.max_epochs" in result.stderr
    )
    assert not (tmp_path / "outputs").exists(), "a rejected command must not create a run folder"


def test_wrong_type_and_unknown_init_fail_with_one_line(tmp_path: Path) -> None:
    result = run_cli(["litlab-train", *FAST, "model/kan/init=glorot", "model.net.init.name=xavier"], tmp_path)
    assert result.returncode == 1
    errors = [line for line in result.stderr.splitlines() if "litlab:" in line]
    assert len(errors) == 1 and "valid names: baseline" in errors[0]
    assert "Traceback" not in result.stderr


def test_missing_data_file_says_where_it_looked(tmp_path: Path) -> None:
    overrides = [
        "experiment=kan/feynman",
        "data.mode=csv",
        "data.equation=I.6.2a",
        f"data.root={tmp_path}/none",
    ]
    (tmp_path / "none").mkdir()
    result = run_cli(["litlab-train", *overrides], tmp_path, env={"LITLAB_DATA_ROOT": str(tmp_path / "none")})
    assert result.returncode == 1, "a file missing under an existing data root is found when data is built"
    assert not list(tmp_path.glob("outputs/**/*.ckpt")), "nothing was trained"
    assert "FeynmanEquations.csv" in result.stderr and "data.root" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.slow
def test_resume_continues_from_last_checkpoint_and_eval_reads_it(tmp_path: Path) -> None:
    first = run_cli(["litlab-train", *FAST, "run_id=r1", "test=false", "optimized_metric=null"], tmp_path)
    assert first.returncode == 0, first.stderr[-2000:]
    run_dir = tmp_path / "outputs" / "kan" / "function_fit" / "r1"
    record = (run_dir / "command.txt").read_text()
    second = run_cli(
        [
            "litlab-train",
            *FAST[1:],
            "trainer.max_epochs=40",
            "run_id=r1",
            "resume=auto",
            "optimized_metric=null",
        ],
        tmp_path,
    )
    assert second.returncode == 0, second.stderr[-2000:]
    assert "resuming from" in second.stdout + second.stderr
    assert "trainer.max_epochs: 20 -> 40" in second.stdout + second.stderr, "the changed config is named"
    assert (run_dir / "config_resolved.leg2.yaml").is_file()
    train_epochs = {int(row["epoch"]) for row in _metrics_rows(run_dir) if row.get("train/loss")}
    assert train_epochs == set(range(40)), "both legs' training metrics are in one CSV, once each"
    assert (run_dir / "command.txt").read_text() != record, "the second leg records its own command"

    evaluation = run_cli(
        [
            "litlab-eval",
            *FAST[1:],
            f"ckpt_path={run_dir}/checkpoints/last.ckpt",
            "optimized_metric=test/rel_l2",
        ],
        tmp_path,
    )
    assert evaluation.returncode == 0, evaluation.stderr[-2000:]
    assert "test/rel_l2" in evaluation.stdout


@pytest.mark.slow
def test_eval_rejects_corrupt_and_foreign_checkpoints(tmp_path: Path) -> None:
    corrupt = tmp_path / "corrupt.ckpt"
    corrupt.write_bytes(b"not a checkpoint")
    result = run_cli(["litlab-eval", f"ckpt_path={corrupt}"], tmp_path)
    assert result.returncode == 2 and "is not a readable checkpoint" in result.stderr
    assert corrupt.read_bytes() == b"not a checkpoint", "nothing the user wrote is touched"

    train = run_cli(["litlab-train", *FAST, "run_id=small", "test=false", "optimized_metric=null"], tmp_path)
    assert train.returncode == 0, train.stderr[-2000:]
    ckpt = tmp_path / "outputs" / "kan" / "function_fit" / "small" / "checkpoints" / "last.ckpt"
    result = run_cli(["litlab-eval", *FAST[1:], f"ckpt_path={ckpt}", "model.net.width=16"], tmp_path)
    assert result.returncode == 2
    assert "does not fit this model" in result.stderr


def test_a_failure_leaves_its_traceback_in_the_run_log(tmp_path: Path) -> None:
    result = run_cli(["litlab-train", *FAST, "model.net.depth=-1", "run_id=broken"], tmp_path)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    log = (tmp_path / "outputs" / "kan" / "function_fit" / "broken" / "train.log").read_text()
    assert "Traceback (most recent call last)" in log and "need depth >= 0" in log
    assert not (tmp_path / "outputs" / "kan" / "function_fit" / "broken" / "config_resolved.yaml").exists()
