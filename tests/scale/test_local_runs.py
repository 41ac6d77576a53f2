"""Local multi-process and preemption runs through the console script (each in its own process group)."""

from __future__ import annotations

import re
import signal
from pathlib import Path

import lightning as L
import pytest
from hydra.utils import instantiate

from tests.conftest import run_cli
from tests.scale.conftest import (
    EPOCHS,
    RUNS,
    WORKLOAD,
    assert_identical_state,
    checkpoint_state,
    max_weight_difference,
    metric_rows,
    results,
    start_cli,
    stop,
    wait_for,
)

# 2-process DDP vs 1 process, same global batch and seed: the all-reduced mean of the two half-batch
# gradients equals the full-batch gradient up to float32 summation order, and Adam (whose update per
# parameter is at most ~lr = 1e-3 a step) carries that rounding forward. Measured after 600 steps:
# 3.5e-5 largest weight gap, while training moves weights by up to 0.94. The bound, one Adam step
# (1e-3), is 30x the measured gap; a different batch split, seed or learning rate moves weights by >0.1.
DDP_ATOL = 1e-3


@pytest.mark.slow
def test_ddp_cpu_two_processes_match_one_process(reference_run: Path, tmp_path: Path, compose_config) -> None:
    result = run_cli(
        ["litlab-train", *WORKLOAD, *EPOCHS, "trainer=ddp_cpu", "run_id=ddp"], tmp_path, timeout=600
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "MEMBER: 2/2" in result.stdout + result.stderr, "two processes joined the process group"
    ddp, single = checkpoint_state(tmp_path / RUNS / "ddp"), checkpoint_state(reference_run)
    assert ddp["step"] == single["step"] == 600
    cfg = compose_config("train", WORKLOAD)
    L.seed_everything(cfg.seed)
    net = instantiate(cfg.model.net)(**instantiate(cfg.data).data_spec())  # as Regressor.bind_data builds it
    initial = {"state_dict": {f"net.{k}": v for k, v in net.state_dict().items()}}
    assert max_weight_difference(single, initial) > 100 * DDP_ATOL, "training moved the weights far more"
    assert max_weight_difference(ddp, single) < DDP_ATOL
    assert results(tmp_path / RUNS / "ddp")["value"] == pytest.approx(
        results(reference_run)["value"], rel=1e-3
    )


@pytest.mark.slow
def test_sigterm_then_relaunch_reproduces_an_uninterrupted_run(reference_run: Path, tmp_path: Path) -> None:
    run_dir = tmp_path / RUNS / "local"
    first = start_cli(["litlab-train", *WORKLOAD, *EPOCHS, "run_id=local"], tmp_path)
    try:
        wait_for(
            lambda: (run_dir / "checkpoints" / "last.ckpt").exists(), 300, "the first periodic last.ckpt"
        )
        first.send_signal(signal.SIGTERM)
        code = stop(first, 120)
    finally:
        if first.poll() is None:
            first.kill()
    out = (tmp_path / "litlab-train.out").read_text()
    assert code == 128 + signal.SIGTERM, (tmp_path / "litlab-train.err").read_text()[-3000:]
    stopped = re.search(r"stopped by SIGTERM after step (\d+);.* run_id=local resume=auto", out)
    assert stopped and 50 <= int(stopped.group(1)) < 600, out[-2000:]
    assert not (run_dir / "results.json").exists(), "the first leg stopped before testing"

    second = run_cli(
        ["litlab-train", *WORKLOAD, *EPOCHS, "run_id=local", "resume=auto"], tmp_path, timeout=600
    )
    assert second.returncode == 0, second.stderr[-3000:]
    assert f"resuming from {run_dir}" in second.stdout + second.stderr

    assert_identical_state(checkpoint_state(run_dir), checkpoint_state(reference_run))
    assert metric_rows(run_dir) == metric_rows(reference_run), "both legs log exactly the uninterrupted rows"
    assert results(run_dir) == results(reference_run)


def test_local_multirun_with_ddp_stops_before_any_job(tmp_path: Path) -> None:
    result = run_cli(["litlab-train", "-m", *WORKLOAD, "trainer=ddp_cpu", "seed=0,1"], tmp_path)
    assert result.returncode != 0
    assert "re-launches the whole sweep in every DDP child" in result.stderr
    assert "hydra/launcher=slurm" in result.stderr
    assert not list(tmp_path.rglob("last.ckpt")), "no job trained"
