"""`litlab-train -m hydra/launcher=slurm` on a real two-node SLURM cluster (scripts/slurm/cluster.sh)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.scale.conftest import (
    EPOCHS,
    RUNS,
    WORKLOAD,
    assert_identical_state,
    checkpoint_state,
    metric_rows,
    results,
    start_cli,
    stop,
    wait_for,
)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(420)]
# One CPU per task, and SLURM kills a job after 5 minutes, so nothing outlives the test.
ON_SLURM = ["-m", "hydra/launcher=slurm", "resources.cpus_per_task=1", "resources.timeout_min=5"]


def job_logs(sweep_dir: Path) -> str:
    """Every task's submitit log of a sweep, concatenated."""
    return "\n".join(p.read_text() for p in sorted((sweep_dir / ".submitit").glob("*/*_log.*")))


def test_slurm_job_completes_and_matches_the_local_run(
    slurm: dict, reference_run: Path, tmp_path: Path
) -> None:
    result = run_cli(["litlab-train", *ON_SLURM, *WORKLOAD, *EPOCHS, "run_id=a"], tmp_path, 400, slurm)
    assert result.returncode == 0, result.stderr[-3000:]
    run_dir = tmp_path / RUNS / "multirun" / "a" / "0"
    assert "slurm job" in job_logs(run_dir.parent), "the job ran inside SLURM"
    assert results(run_dir)["value"] == results(reference_run)["value"]
    assert metric_rows(run_dir) == metric_rows(reference_run)
    assert_identical_state(checkpoint_state(run_dir), checkpoint_state(reference_run))


def test_two_node_ddp_job_puts_one_rank_on_each_node(slurm: dict, tmp_path: Path) -> None:
    # Short: that two processes reproduce one is test_ddp_cpu_two_processes_match_one_process.
    overrides = ["trainer=ddp_cpu", "resources.nodes=2", "resources.devices=1", "trainer.max_epochs=60"]
    result = run_cli(["litlab-train", *ON_SLURM, *WORKLOAD, *overrides, "run_id=b"], tmp_path, 400, slurm)
    assert result.returncode == 0, result.stderr[-3000:]
    sweep_dir = tmp_path / RUNS / "multirun" / "b"
    logs = job_logs(sweep_dir)
    placement = dict(re.findall(r"rank (\d)/2 on node (n\d)", logs))
    assert placement == {"0": "n1", "1": "n2"}, logs[-3000:]
    assert "MASTER_ADDR=127.0.0.1" in logs, "the first node's NodeAddr, since the name n1 does not resolve"
    assert "All distributed processes registered. Starting with 2 processes" in logs
    assert checkpoint_state(sweep_dir / "0")["step"] == 60
    assert 0 < results(sweep_dir / "0")["value"] < 1


def test_multirun_becomes_a_job_array_and_both_finish(slurm: dict, tmp_path: Path) -> None:
    overrides = ["trainer.max_epochs=20", "model.net.width=2,4", "run_id=c"]
    result = run_cli(["litlab-train", *ON_SLURM, *WORKLOAD, *overrides], tmp_path, 400, slurm)
    assert result.returncode == 0, result.stderr[-3000:]
    sweep_dir = tmp_path / RUNS / "multirun" / "c"
    array_tasks = sorted(p.name.split("_")[1] for p in (sweep_dir / ".submitit").glob("*_*") if p.is_dir())
    assert array_tasks == ["0", "1"], "one array job with tasks 0 and 1"
    for job, width in (("0", "2"), ("1", "4")):
        assert f"width: {width}" in (sweep_dir / job / "config_resolved.yaml").read_text()
        assert results(sweep_dir / job)["optimized_metric"] == "test/rel_l2"


def test_preempted_job_requeues_and_finishes_as_if_uninterrupted(
    slurm: dict, reference_run: Path, tmp_path: Path
) -> None:
    run_dir = tmp_path / RUNS / "multirun" / "d" / "0"
    launcher = start_cli(["litlab-train", *ON_SLURM, *WORKLOAD, *EPOCHS, "run_id=d"], tmp_path, slurm)
    try:
        wait_for(
            lambda: (run_dir / "checkpoints" / "last.ckpt").exists(), 300, "the first periodic last.ckpt"
        )
        job = subprocess.run(
            ["squeue", "-h", "-o", "%A"], capture_output=True, text=True, timeout=30
        ).stdout.split()
        assert len(job) == 1, job
        # What SLURM sends signal_delay_s before the time limit (and what submitit calls preemption).
        subprocess.run(["scancel", "--signal=USR2", job[0]], check=True, timeout=30)
        code = stop(launcher, 360)
    finally:
        if launcher.poll() is None:
            launcher.kill()
    assert code == 0, (tmp_path / "litlab-train.err").read_text()[-3000:]
    logs = job_logs(run_dir.parent)
    stopped = re.search(r"stopped by SIGUSR2 after step (\d+);.*was requeued", logs)
    assert stopped and int(stopped.group(1)) < 600, logs[-3000:]
    assert "restart 1" in logs and f"resuming from {run_dir}" in logs
    assert_identical_state(checkpoint_state(run_dir), checkpoint_state(reference_run))
    assert metric_rows(run_dir) == metric_rows(reference_run)
    assert results(run_dir) == results(reference_run)
