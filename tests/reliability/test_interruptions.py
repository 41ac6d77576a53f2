"""Killed, stopped, raced and poisoned runs: what is written survives, and a resume is exact.

SIGKILL and SIGTERM land at seeded random moments of full-batch and mini-batch runs; the relaunched run
must end bit-identical to an uninterrupted one (weights, Adam state, metrics.csv rows) with no temporary
files left. A study killed inside a fit must continue that fit from its checkpoint to the same tables. A
second run with the same id must fail fast and leave the first run intact. A pickle planted in the data
cache must never run, and a full disk must be a clear one-line error.
"""

from __future__ import annotations

import errno
import pickle
import random
import re
import signal
import time
from pathlib import Path

import pytest
import torch

from litlab.core import cache
from litlab.core.errors import explain
from tests.conftest import run_cli
from tests.scale.conftest import (
    RUNS,
    WORKLOAD,
    assert_identical_state,
    checkpoint_state,
    metric_rows,
    start_cli,
    wait_for,
)

SHORT = ["trainer.max_epochs=300", "callbacks.last_checkpoint.every_n_train_steps=20"]
MINI_BATCH = [
    "data.batch_size=80",
    "trainer.max_epochs=60",
    "callbacks.last_checkpoint.every_n_train_steps=10",
]
MODES = {"full_batch": SHORT, "mini_batch": MINI_BATCH}


def _saved_step(checkpoint: Path, *keys: str) -> int:
    """The step stored under ``keys`` in ``checkpoint``, or -1 while there is no readable file."""
    try:
        saved = torch.load(checkpoint, map_location="cpu", weights_only=True)
    except Exception:
        return -1
    for key in keys:
        saved = saved[key]
    return saved


def _last_step(run_dir: Path) -> int:
    return _saved_step(run_dir / "checkpoints" / "last.ckpt", "global_step")


def _fit_step(checkpoint: Path) -> int:
    return _saved_step(checkpoint, "loop", "step")


@pytest.fixture(scope="module")
def references(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One uninterrupted run per mode."""
    cwd = tmp_path_factory.mktemp("references")
    runs = {}
    for mode, extra in MODES.items():
        result = run_cli(["litlab-train", *WORKLOAD, *extra, f"run_id={mode}"], cwd, timeout=900)
        assert result.returncode == 0, result.stderr[-3000:]
        runs[mode] = cwd / RUNS / mode
    return runs


@pytest.mark.slow
@pytest.mark.parametrize("mode", sorted(MODES))
@pytest.mark.parametrize("signum", [signal.SIGKILL, signal.SIGTERM], ids=["sigkill", "sigterm"])
def test_interrupted_run_resumes_bit_identical(
    mode: str, signum: signal.Signals, references: dict[str, Path], tmp_path: Path
) -> None:
    rng = random.Random(f"{mode}-{signum.name}")  # seeded "random" moments, reproducible
    run_dir = tmp_path / RUNS / "cut"
    args = ["litlab-train", *WORKLOAD, *MODES[mode], "run_id=cut"]
    process = start_cli(args, tmp_path)
    try:
        target = rng.choice([20, 40, 60]) if mode == "full_batch" else rng.choice([10, 20, 30])
        wait_for(lambda: _last_step(run_dir) >= target or process.poll() is not None, 300, "a checkpoint")
        time.sleep(rng.uniform(0.0, 0.3))
        process.send_signal(signum)
        process.wait(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode != 0, "the run was stopped before it finished"
    resumed = run_cli([*args, "resume=auto"], tmp_path, timeout=900)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    reference = references[mode]
    assert_identical_state(checkpoint_state(run_dir), checkpoint_state(reference))
    assert metric_rows(run_dir) == metric_rows(reference), "each step's metrics once, as uninterrupted"
    assert not list(run_dir.rglob("*.tmp")), "no temporary file outlives the resumed run"


# A study whose one fit (CartanFM, 120 steps) keeps its state in fits/r2r_case0/cartanfm_seed0.ckpt every 10.
SPRITE_TASK = [
    "litlab-run",
    "task=symspace/sprite_claim",
    "task.splits=[r2r]",
    "task.cases=[0]",
    "task.seeds=[0]",
    "task.max_steps=120",
    "task.early_stopping.every=10",
    "task.early_stopping.patience=1000",
    "task.classifier_epochs=1",
    "task.data.grid.n_positions=4",
    "task.data.batch_size=16",
    "task.models.cartanfm.unet_width=8",
    "task.models.cartanfm.sample_steps=2",
    "~task.models.vae",
    "~task.models.beta_vae",
    "~task.models.fm_only",
    "extras.torch_threads=1",
]
TASK_RUNS = Path("outputs") / "task" / "symspace" / "sprite_claim"


@pytest.mark.slow
def test_a_study_killed_inside_a_fit_continues_that_fit_bit_identical(tmp_path: Path) -> None:
    whole = run_cli([*SPRITE_TASK, "run_id=whole"], tmp_path, timeout=600)
    assert whole.returncode == 0, whole.stderr[-3000:]
    cut = tmp_path / TASK_RUNS / "cut"
    checkpoint = cut / "fits" / "r2r_case0" / "cartanfm_seed0.ckpt"
    process = start_cli([*SPRITE_TASK, "run_id=cut"], tmp_path)
    try:
        wait_for(lambda: _fit_step(checkpoint) >= 40 or process.poll() is not None, 300, "a fit checkpoint")
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode != 0, "the study was killed before it finished"
    killed_at = _fit_step(checkpoint)
    resumed = run_cli([*SPRITE_TASK, "run_id=cut", "resume=auto"], tmp_path, timeout=600)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert f"cartanfm seed 0 (continued from step {killed_at})" in resumed.stdout + resumed.stderr
    runs = "tables/runs.csv"
    assert (cut / runs).read_text() == (tmp_path / TASK_RUNS / "whole" / runs).read_text()
    kept = [path.name for path in cut.rglob("*.ckpt*")]
    assert kept == ["cartanfm_seed0.ckpt"], "no partial file; a fit that reached max_steps keeps its state"


@pytest.mark.slow
def test_a_second_run_with_the_same_id_fails_fast_and_the_first_finishes(tmp_path: Path) -> None:
    args = ["litlab-train", *WORKLOAD, *SHORT, "run_id=same"]
    first = start_cli(args, tmp_path)
    try:
        wait_for(lambda: (tmp_path / RUNS / "same" / ".litlab.lock").exists(), 120, "the first run's lock")
        started = time.monotonic()
        second = run_cli(args, tmp_path, timeout=120)
        assert second.returncode == 2, second.stderr[-2000:]
        assert "in use by a running run" in second.stderr or "already holds" in second.stderr
        assert time.monotonic() - started < 60
        first.wait(timeout=900)
    finally:
        if first.poll() is None:
            first.kill()
    assert first.returncode == 0
    assert (tmp_path / RUNS / "same" / "results.json").exists()
    trained = [row for row in metric_rows(tmp_path / RUNS / "same") if row.get("train/loss")]
    assert trained[-1]["epoch"] == "299", "the first run trained all its epochs"


class _Payload:
    """Unpickling this object would create a marker file (what a malicious cache file could do)."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple:
        return (Path.touch, (self.marker,))


def test_a_planted_pickle_in_the_cache_never_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LITLAB_CACHE", str(tmp_path / "cache"))
    marker = tmp_path / "pwned"
    built = []

    def build() -> dict[str, torch.Tensor]:
        built.append(1)
        return {"x": torch.arange(3.0)}

    first = cache.cached_tensors("events", "flight", "1", {"seed": 0}, build)
    path = next((tmp_path / "cache" / "events").glob("flight-*.safetensors"))
    path.write_bytes(pickle.dumps(_Payload(marker)))
    again = cache.cached_tensors("events", "flight", "1", {"seed": 0}, build)
    assert not marker.exists(), "the planted pickle was executed"
    assert torch.equal(first["x"], again["x"]) and len(built) == 2, "the poisoned entry was rebuilt"


def test_no_loader_unpickles_untrusted_files() -> None:
    repo = Path(__file__).resolve().parents[2]
    sources = [
        p for folder in ("src", "datamodules", "callbacks", "kernels") for p in (repo / folder).rglob("*.py")
    ]
    unsafe = re.compile(r"torch\.load\([^)]*weights_only=False|pickle\.loads?\(|allow_pickle=True")
    offenders = [str(p) for p in sources if unsafe.search(p.read_text())]
    assert offenders == [], "loaders must read tensors (safetensors, weights_only=True), never pickles"


def test_a_full_disk_is_one_clear_line_and_keeps_the_previous_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from litlab.callbacks.checkpoint_io import AtomicCheckpointIO

    io = AtomicCheckpointIO()
    target = tmp_path / "checkpoints" / "last.ckpt"
    io.save_checkpoint({"state_dict": {"w": torch.ones(2)}}, target)

    def full(obj: object, handle: object, *args: object, **kwargs: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device", str(target))

    monkeypatch.setattr(torch, "save", full)
    with pytest.raises(OSError) as error:
        io.save_checkpoint({"state_dict": {"w": torch.zeros(2)}}, target)
    monkeypatch.undo()
    assert explain(error.value).startswith("the disk is full while writing")
    assert torch.equal(torch.load(target, weights_only=True)["state_dict"]["w"], torch.ones(2))
    assert [p.name for p in target.parent.iterdir()] == ["last.ckpt"]
