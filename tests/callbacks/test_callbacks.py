"""Atomic checkpoint writes, the non-finite loss guard, and figure logging."""

from __future__ import annotations

from pathlib import Path

import lightning as L
import matplotlib.pyplot as plt
import pytest
import torch
from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.demos.boring_classes import BoringModel

from litlab.callbacks.checkpoint_io import AtomicCheckpointIO
from litlab.callbacks.figures import FigureCallback
from litlab.callbacks.nan_guard import NonFiniteGuard, NonFiniteLossError


def _trainer(tmp_path: Path, callbacks: list, max_steps: int = 4) -> L.Trainer:
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


def test_nan_guard_stops_and_keeps_last_good_checkpoint(tmp_path: Path) -> None:
    checkpoint = ModelCheckpoint(dirpath=tmp_path / "ckpt", save_last=True, every_n_train_steps=1)
    trainer = _trainer(tmp_path, [NonFiniteGuard(), checkpoint], max_steps=10)
    with pytest.raises(NonFiniteLossError, match="became nan at epoch 0, step 3"):
        trainer.fit(_ExplodingModel())
    saved = torch.load(tmp_path / "ckpt" / "last.ckpt", weights_only=True)
    assert saved["global_step"] == 3
    assert all(torch.isfinite(v).all() for v in saved["state_dict"].values())


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
