"""The ``self.log`` fast path: same logged values as Lightning's own, real moves still happen."""

from __future__ import annotations

from pathlib import Path

import lightning as L
import pytest
import torch
from lightning.pytorch.demos.boring_classes import BoringModel
from lightning.pytorch.loggers import CSVLogger
from lightning.pytorch.trainer.connectors.logger_connector.result import _Metadata, _ResultMetric

from litlab.runner.metric_logging import skip_redundant_metric_moves


class _LoggingModel(BoringModel):
    def training_step(self, batch, batch_idx):
        out = super().training_step(batch, batch_idx)
        self.log("train/loss", out["loss"], on_step=True, on_epoch=True)
        self.log("train/max", out["loss"], on_step=False, on_epoch=True, reduce_fx="max")
        return out


def _logged(tmp_path: Path) -> str:
    L.seed_everything(0, verbose=False)
    trainer = L.Trainer(
        default_root_dir=tmp_path,
        max_epochs=3,
        limit_train_batches=5,
        limit_val_batches=0,
        logger=CSVLogger(tmp_path),
        log_every_n_steps=1,
        enable_progress_bar=False,
        enable_model_summary=False,
        enable_checkpointing=False,
        accelerator="cpu",
    )
    trainer.fit(_LoggingModel())
    return next(tmp_path.rglob("metrics.csv")).read_text()


def test_patched_logging_writes_the_same_metrics(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    skip_redundant_metric_moves()
    patched = _logged(tmp_path / "patched")
    monkeypatch.setattr(_ResultMetric, "to", _ResultMetric.to.__wrapped__)
    assert patched == _logged(tmp_path / "lightning")


def test_a_move_to_another_device_still_moves_every_tensor() -> None:
    skip_redundant_metric_moves()
    metric = _ResultMetric(_Metadata(fx="training_step", name="loss"), is_tensor=True)
    metric.update(torch.tensor(2.0), batch_size=3)
    assert metric.to(torch.device("cpu")) is metric
    metric.to(torch.device("meta"))
    assert metric.value.device.type == "meta" and metric.cumulated_batch_size.device.type == "meta"


def test_patching_twice_wraps_once() -> None:
    skip_redundant_metric_moves()
    skip_redundant_metric_moves()
    assert not getattr(_ResultMetric.to.__wrapped__, "skips_redundant_moves", False)
