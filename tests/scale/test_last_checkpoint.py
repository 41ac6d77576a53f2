"""LastCheckpoint in one process: a run stopped by a signal and resumed equals an uninterrupted run."""

from __future__ import annotations

import csv
import os
import signal
import sys
import types
from functools import partial
from pathlib import Path

import lightning as L
import pytest
import torch
from lightning.pytorch.callbacks import Callback, ModelCheckpoint
from torch.utils.data import DataLoader, TensorDataset

from litlab.callbacks.last_checkpoint import LastCheckpoint, Preempted
from litlab.loggers import ResumableCSVLogger
from litlab.methods.kan.layers import build_kan
from litlab.methods.kan.module import Regressor


class SineData(L.LightningDataModule):
    """240 training points in ``n_batches`` unshuffled batches; 80 validation/test points."""

    def __init__(self, n_batches: int) -> None:
        super().__init__()
        self.n_batches = n_batches

    def setup(self, stage: str | None = None) -> None:
        x = torch.rand(320, 2, generator=torch.Generator().manual_seed(0)) * 2 - 1
        y = torch.sin(3 * x[:, :1]) * x[:, 1:]
        self.train_set, self.val_set = TensorDataset(x[:240], y[:240]), TensorDataset(x[240:], y[240:])

    def train_dataloader(self) -> DataLoader:
        return DataLoader(self.train_set, batch_size=240 // self.n_batches)

    def val_dataloader(self) -> DataLoader:
        return DataLoader(self.val_set, batch_size=80)

    def test_dataloader(self) -> DataLoader:
        return DataLoader(self.val_set, batch_size=80)


class SignalAt(Callback):
    """Send ``signum`` to this process at the end of optimizer step ``step`` (as SLURM or a user would)."""

    def __init__(self, step: int, signum: int) -> None:
        self.step, self.signum = step, signum

    def on_train_batch_end(self, trainer: L.Trainer, *args: object) -> None:
        if trainer.global_step == self.step:
            os.kill(os.getpid(), self.signum)


def fit(
    root: Path, n_batches: int, extra: list[Callback] = (), resume: bool = False, **last: object
) -> L.Trainer:
    """Train a tiny KAN (StepLR schedule, val every 2 epochs, best checkpoint by val) for 6 epochs."""
    L.seed_everything(0)
    net = build_kan(n_in=2, n_out=1, width=4, depth=1, grid_size=5, spline_order=3)
    scheduler = partial(torch.optim.lr_scheduler.StepLR, step_size=2, gamma=0.5)
    model = Regressor(net, partial(torch.optim.Adam, lr=1e-2), scheduler)
    callbacks = [
        ModelCheckpoint(dirpath=root / "checkpoints", monitor="val/rel_l2", filename="best"),
        LastCheckpoint(root / "checkpoints", **last),
        *extra,
    ]
    trainer = L.Trainer(
        max_epochs=6,
        check_val_every_n_epoch=2,
        deterministic=True,
        callbacks=callbacks,
        logger=ResumableCSVLogger(save_dir=root, name="csv", version=""),
        log_every_n_steps=1,
        enable_progress_bar=False,
        enable_model_summary=False,
        default_root_dir=root,
    )
    ckpt = root / "checkpoints" / "last.ckpt" if resume else None
    trainer.fit(model, SineData(n_batches), ckpt_path=ckpt, weights_only=True)
    trainer.test(model, SineData(n_batches), ckpt_path="best", weights_only=True, verbose=False)
    return trainer


def snapshot(trainer: L.Trainer, root: Path) -> dict:
    with open(root / "csv" / "metrics.csv") as handle:
        rows = list(csv.DictReader(handle))
    weights = {k: v.clone() for k, v in trainer.lightning_module.state_dict().items()}
    return {"rows": rows, "weights": weights, "test": float(trainer.callback_metrics["test/rel_l2"])}


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory: pytest.TempPathFactory) -> dict[int, dict]:
    runs = {}
    for n_batches in (1, 4):
        root = tmp_path_factory.mktemp(f"uninterrupted{n_batches}")
        runs[n_batches] = snapshot(fit(root, n_batches), root)
    return runs


def interrupted_then_resumed(root: Path, n_batches: int, step: int, signum: int, **last: object) -> tuple:
    handlers = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGUSR2)
    with pytest.raises(Preempted) as stopped:
        fit(root, n_batches, [SignalAt(step, signum)], **last)
    assert (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGUSR2)) == handlers, "restored"
    saved_step = torch.load(root / "checkpoints" / "last.ckpt", weights_only=True)["global_step"]
    return stopped.value.code, saved_step, snapshot(fit(root, n_batches, resume=True, **last), root)


def assert_same_run(resumed: dict, reference: dict) -> None:
    for name, tensor in reference["weights"].items():
        assert torch.equal(resumed["weights"][name], tensor), name
    assert resumed["rows"] == reference["rows"], "the metrics CSV of both legs equals the uninterrupted one"
    assert resumed["test"] == reference["test"]


@pytest.mark.parametrize(
    ("n_batches", "step", "saved_at"),
    [
        (1, 3, 3),  # full batch: every step is an epoch end; step 3 ends epoch 2, before its validation
        (1, 4, 4),  # ... and step 4 ends epoch 3, right after a validation
        (4, 6, 8),  # mid-epoch with a loader that cannot resume: waits for the epoch end (step 8)
        (4, 8, 8),  # the last batch of a validation epoch: saved after that validation
    ],
)
def test_sigterm_saves_at_an_exact_point_and_resume_matches(
    uninterrupted: dict, tmp_path: Path, n_batches: int, step: int, saved_at: int
) -> None:
    code, saved_step, resumed = interrupted_then_resumed(tmp_path, n_batches, step, signal.SIGTERM)
    assert code == 128 + signal.SIGTERM
    assert saved_step == saved_at
    assert_same_run(resumed, uninterrupted[n_batches])


def test_requeue_signal_outside_slurm_saves_and_stops(uninterrupted: dict, tmp_path: Path, capsys) -> None:
    code, saved_step, resumed = interrupted_then_resumed(tmp_path, 1, 2, signal.SIGUSR2)
    assert code == 128 + signal.SIGUSR2 and saved_step == 2
    out = capsys.readouterr().out
    assert "stopped by SIGUSR2 after step 2" in out and f"run_id={tmp_path.name} resume=auto" in out
    assert_same_run(resumed, uninterrupted[1])


def test_a_wandb_run_is_marked_preempting(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    marked = []
    fake_wandb = types.SimpleNamespace(run=types.SimpleNamespace(mark_preempting=lambda: marked.append(True)))
    monkeypatch.setitem(sys.modules, "wandb", fake_wandb)
    with pytest.raises(Preempted):
        fit(tmp_path, 1, [SignalAt(2, signal.SIGUSR2)])
    assert marked == [True], "so a wandb sweep hands this run out again"


def test_far_epoch_end_saves_mid_epoch_with_a_warning(tmp_path: Path) -> None:
    # exact_wait_s=0: the epoch end is always "too far", so the save happens at the next batch end.
    with pytest.warns(UserWarning, match="restarts this epoch's data"), pytest.raises(Preempted):
        fit(tmp_path, 4, [SignalAt(6, signal.SIGTERM)], exact_wait_s=0.0)
    assert torch.load(tmp_path / "checkpoints" / "last.ckpt", weights_only=True)["global_step"] == 6


def test_periodic_saves_every_n_steps_and_at_the_end(tmp_path: Path) -> None:
    last = tmp_path / "checkpoints" / "last.ckpt"

    class SavedStepAtEpochStart(Callback):
        steps: list[int | None] = []

        def on_train_epoch_start(self, trainer: L.Trainer, *args: object) -> None:
            self.steps.append(torch.load(last, weights_only=True)["global_step"] if last.exists() else None)

    probe = SavedStepAtEpochStart()
    fit(tmp_path, 1, [probe], every_n_train_steps=4)
    assert probe.steps == [None, None, None, None, 4, 4]
    assert torch.load(last, weights_only=True)["global_step"] == 6, "saved again at the end of fit"


def test_rejects_bad_intervals(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="every_n_train_steps"):
        LastCheckpoint(tmp_path, every_n_train_steps=0)
    with pytest.raises(ValueError, match="every_n_minutes"):
        LastCheckpoint(tmp_path, every_n_minutes=-1)
