"""LightningModule: reconstruct a UAV flight's ground texture from blurred/low-light RGB plus events."""

from __future__ import annotations

import json
import math
from typing import Any

import lightning as L
import matplotlib.pyplot as plt
import torch
from matplotlib.figure import Figure

from litlab.core.errors import ConfigError
from litlab.core.paths import cache_dir
from litlab.datamodules.events import UAVSequence
from litlab.methods.skyevents.gta import GEOMETRIES, estimate_offset_gta
from litlab.methods.skyevents.objective import EventReconstruction
from litlab.optim import OptimizerFactory


def gta_offset_cached(sequence: UAVSequence, geometry: str = "lidar") -> float:
    """GTA's offset for ``sequence``, stored beside a cached synthetic flight so reruns skip the search."""
    if sequence.key is None:
        return estimate_offset_gta(sequence, geometry=geometry).offset
    suffix = "" if geometry == "lidar" else f"_{geometry}"
    path = cache_dir("events") / f"skyevents_{sequence.key}_gta{suffix}.json"
    if path.exists():
        return float(json.loads(path.read_text())["offset"])
    offset = estimate_offset_gta(sequence, geometry=geometry).offset
    path.write_text(json.dumps({"offset": offset}))
    return offset


class EventReconstructor(L.LightningModule):
    """Train ``objective`` on the DataModule's flight; validation/test report PSNR/SSIM on held-out views.

    Args:
        objective: the setup (RGB only, whole-frame events, or RER).
        optimizer: partial optimizer for the texture.
        offset: event-clock offset in seconds, or ``"gta"`` to estimate it with GTA in ``setup``
            (``"true"`` uses the simulator's planted offset, an oracle for ablations).
        gta_geometry: ``lidar`` (GTA as reconstructed) or ``flat`` (the ablation: flat ground, no LiDAR).
    """

    def __init__(
        self,
        objective: EventReconstruction,
        optimizer: OptimizerFactory,
        offset: float | str = "gta",
        gta_geometry: str = "lidar",
    ) -> None:
        super().__init__()
        self.save_hyperparameters(logger=False, ignore=["objective", "optimizer"])
        self.objective = objective
        self.optimizer_factory = optimizer
        if gta_geometry not in GEOMETRIES:
            raise ConfigError(f"model.gta_geometry must be one of {GEOMETRIES}, got {gta_geometry!r}")
        self.offset = offset
        self.gta_geometry = gta_geometry
        self.sequence: UAVSequence | None = None
        self._total_steps: int | None = None

    def resolve_offset(self, sequence: UAVSequence) -> float:
        """The offset the event loss uses, as a number of seconds."""
        if self.offset == "gta":
            return gta_offset_cached(sequence, self.gta_geometry)
        if self.offset == "true":
            return float(sequence.time_offset or 0.0)
        return float(self.offset)

    def setup(self, stage: str) -> None:
        if self.sequence is None:
            datamodule = self.trainer.datamodule
            datamodule.setup(stage)
            self.sequence = datamodule.sequence
            self.objective.build(self.sequence, self.resolve_offset(self.sequence))

    def training_step(self, batch: torch.Tensor, batch_idx: int) -> torch.Tensor:
        losses = self.objective.losses(self.sequence, batch.cpu())
        for name, value in losses.items():
            self.log(
                f"train/{name}",
                value,
                on_step=False,
                on_epoch=True,
                prog_bar=name == "total",
                batch_size=len(batch),
            )
        return losses["total"]

    def _evaluate(self, batch: torch.Tensor, stage: str) -> None:
        metrics = self.objective.evaluate(self.sequence, batch.cpu())
        for name, value in metrics.items():
            self.log(
                f"{stage}/{name}", value, on_step=False, on_epoch=True, prog_bar=True, batch_size=len(batch)
            )

    def on_fit_start(self) -> None:
        self.log_offset()

    def on_train_start(self) -> None:
        """The fit's length in steps, for the Gaussians' density schedule (None when unbounded)."""
        total = self.trainer.estimated_stepping_batches
        self._total_steps = int(total) if math.isfinite(total) else None

    def log_offset(self) -> None:
        if self.logger is not None:
            self.logger.log_metrics({"offset_ms": 1e3 * self.objective.offset})

    def validation_step(self, batch: torch.Tensor, batch_idx: int) -> None:
        self._evaluate(batch, "val")

    def test_step(self, batch: torch.Tensor, batch_idx: int) -> None:
        self._evaluate(batch, "test")

    def on_after_backward(self) -> None:
        self.objective.scene.after_backward()

    def on_train_batch_end(self, outputs: object, batch: torch.Tensor, batch_idx: int) -> None:
        self.objective.scene.after_step(self.trainer.optimizers[0], self.global_step, self._total_steps)

    def configure_optimizers(self) -> Any:
        return self.optimizer_factory(params=self.objective.scene.parameter_groups())

    def figures(self, stage: str) -> dict[str, Figure]:
        """A grid of held-out views: captured frame, our sharp render, sharp ground truth (if known)."""
        if stage != "test" or self.sequence is None:
            return {}
        index = self.trainer.datamodule.test_idx[:4]
        with torch.no_grad():
            pred = self.objective.render_rgb(self.sequence, self.sequence.frame_times[index]).clamp(0, 1)
        rows = [("captured", self.sequence.frames[index]), ("render", pred)]
        if self.sequence.sharp_views is not None:
            rows.append(("ground truth", self.sequence.sharp_views[index]))
        fig, axes = plt.subplots(
            len(rows), len(index), figsize=(2.2 * len(index), 1.8 * len(rows)), squeeze=False
        )
        for r, (label, images) in enumerate(rows):
            for c, image in enumerate(images):
                axes[r, c].imshow(image.permute(1, 2, 0).cpu().numpy())
                axes[r, c].set_xticks([])
                axes[r, c].set_yticks([])
            axes[r, 0].set_ylabel(label)
        fig.tight_layout()
        return {"held_out_views": fig}
