"""Atomic checkpoint writes, the divergence guard with its checkpoint roll-back, and figure logging."""

from __future__ import annotations

from pathlib import Path

import lightning as L
import matplotlib.pyplot as plt
import pytest
import torch
from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.demos.boring_classes import BoringModel

from litlab.callbacks.checkpoint_io import AtomicCheckpointIO
from litlab.callbacks.divergence import DivergenceError, DivergenceGuard
from litlab.callbacks.figures import FigureCallback
from litlab.callbacks.last_checkpoint import LastCheckpoint


def _trainer(tmp_path: Path, callbacks: list, max_steps: int = 4, **kwargs: object) -> L.Trainer:
    return L.Trainer(
        default_root_dir=tmp_path,
        max_steps=max_steps,
        limit_val_batches=1,
        callbacks=callbacks,
        plugins=[AtomicCheckpointIO()],
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        accelerator="cpu",
        **kwargs,
    )


def test_atomic_save_keeps_previous_file_when_write_fails(tmp_path: Path, monkeypatch) -> None:
    io = AtomicCheckpointIO()
    target = tmp_path / "last.ckpt"
    io.save_checkpoint({"state_dict": {"w": torch.ones(3)}}, target)

    def crash_midway(obj, handle, *args, **kwargs):
        handle.write(b"partial bytes")
        raise OSError("disk full")

    monkeypatch.setattr(torch, "save", crash_midway)
    with pytest.raises(OSError, match="disk full"):
        io.save_checkpoint({"state_dict": {"w": torch.zeros(3)}}, target)
    monkeypatch.undo()
    restored = torch.load(target, weights_only=True)
    assert torch.equal(restored["state_dict"]["w"], torch.ones(3))
    assert [p.name for p in tmp_path.iterdir()] == ["last.ckpt"], "temporary file left behind"


class _ExplodingModel(BoringModel):
    """Loss turns NaN at step 3."""

    def training_step(self, batch, batch_idx):
        out = super().training_step(batch, batch_idx)
        if self.global_step >= 3:
            out["loss"] = out["loss"] * float("nan")
        return out


def test_guard_stops_on_a_nan_loss_and_keeps_last_good_checkpoint(tmp_path: Path) -> None:
    checkpoint = ModelCheckpoint(dirpath=tmp_path / "ckpt", save_last=True, every_n_train_steps=1)
    trainer = _trainer(tmp_path, [DivergenceGuard(), checkpoint], max_steps=10)
    with pytest.raises(DivergenceError, match="diverged at epoch 0, step 3: the training loss became nan"):
        trainer.fit(_ExplodingModel())
    saved = torch.load(tmp_path / "ckpt" / "last.ckpt", weights_only=True)
    assert saved["global_step"] == 3
    assert all(torch.isfinite(v).all() for v in saved["state_dict"].values())


class _SilentlyCorruptedModel(BoringModel):
    """A parameter the loss never reads turns NaN at step 3: only a weights check can see it."""

    def __init__(self) -> None:
        super().__init__()
        self.unused = torch.nn.Parameter(torch.zeros(2))

    def on_train_batch_end(self, outputs, batch, batch_idx) -> None:
        if self.global_step == 3:
            with torch.no_grad():
                self.unused.fill_(float("nan"))


def test_guard_checks_weights_before_every_save_so_no_checkpoint_holds_nan(tmp_path: Path) -> None:
    checkpoint = ModelCheckpoint(dirpath=tmp_path / "ckpt", save_last=True, every_n_train_steps=1)
    guard = DivergenceGuard(check_weights_every_n_steps=1000)  # the periodic check never runs here
    trainer = _trainer(tmp_path, [guard, checkpoint], max_steps=10)
    with pytest.raises(DivergenceError, match="weights became non-finite, found before a checkpoint"):
        trainer.fit(_SilentlyCorruptedModel())
    saved = torch.load(tmp_path / "ckpt" / "last.ckpt", weights_only=True)
    assert saved["global_step"] == 3  # saved by the callback hook, before the module corrupted itself
    assert all(torch.isfinite(v).all() for v in saved["state_dict"].values())


def test_guard_checks_weights_every_n_steps_without_a_save(tmp_path: Path) -> None:
    trainer = _trainer(tmp_path, [DivergenceGuard(check_weights_every_n_steps=2)], max_steps=10)
    with pytest.raises(DivergenceError, match="step 4: the weights became non-finite, found after the"):
        trainer.fit(_SilentlyCorruptedModel())


class _HugeStepModel(BoringModel):
    """SGD with a learning rate that makes the loss explode within a few steps."""

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.8)


def test_guard_stops_an_exploding_loss_and_rolls_back_to_a_save_from_before_it(tmp_path: Path) -> None:
    L.seed_everything(0, verbose=False)  # the explosion's step depends on the initial weights
    last = LastCheckpoint(tmp_path / "ckpt", every_n_train_steps=1)
    guard = DivergenceGuard(max_loss_ratio=1e3)
    # One batch per epoch: LastCheckpoint saves at every epoch end (where a resume is exact).
    trainer = _trainer(tmp_path, [guard, last], max_steps=50, limit_train_batches=1)
    with pytest.raises(DivergenceError, match=r"exploded .* Start a new run \(run_id=<new name>\)") as error:
        trainer.fit(_HugeStepModel())
    bad_step = trainer.global_step
    assert bad_step >= 2, "the loss must explode after at least one good save"
    saved = torch.load(tmp_path / "ckpt" / "last.ckpt", weights_only=True)
    assert saved["global_step"] < bad_step, "last.ckpt holds a state from before the divergence"
    assert "rolled back" in str(error.value)
    first = guard.first_loss
    model = _HugeStepModel()
    model.load_state_dict(saved["state_dict"])
    batch = next(iter(model.train_dataloader()))
    assert model.training_step(batch, 0)["loss"].item() <= 1e3 * first


class _PlottingModel(BoringModel):
    def figures(self, stage: str) -> dict:
        fig, ax = plt.subplots()
        ax.plot([0, 1], [0, 1])
        return {"line": fig}


def test_figure_callback_writes_png_per_stage(tmp_path: Path) -> None:
    trainer = _trainer(tmp_path, [FigureCallback()])
    model = _PlottingModel()
    trainer.fit(model)
    trainer.test(model, verbose=False)
    pngs = sorted(p.name for p in (tmp_path / "plots").glob("*.png"))
    assert pngs == ["fit_line.png", "test_line.png"]
    assert (tmp_path / "plots" / "fit_line.png").stat().st_size > 1000


def test_guard_reads_pending_losses_together_and_names_the_bad_step() -> None:
    """The accelerator path: losses wait on the device and are read at once; the first bad one is named."""
    from types import SimpleNamespace

    guard = DivergenceGuard(max_loss_ratio=10.0)
    trainer = SimpleNamespace(callbacks=[], checkpoint_callbacks=[], current_epoch=0, global_step=9)
    guard._pending = [(step, torch.tensor(1.0)) for step in range(5)]
    guard._check_losses(trainer)
    assert guard.first_loss == 1.0 and guard._pending == []
    guard._pending = [(5, torch.tensor(2.0)), (6, torch.tensor(float("nan"))), (7, torch.tensor(50.0))]
    with pytest.raises(DivergenceError, match="step 6: the training loss became nan"):
        guard._check_losses(trainer)
    guard._pending = [(7, torch.tensor(5.0)), (8, torch.tensor(50.0))]
    with pytest.raises(DivergenceError, match="step 8: the training loss exploded to 50"):
        guard._check_losses(trainer)
