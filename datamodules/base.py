"""Shared DataModule behaviour: a global batch size that stays fixed across world sizes."""

from __future__ import annotations

import lightning as L


class GlobalBatchDataModule(L.LightningDataModule):
    """A DataModule whose ``batch_size`` is the global batch, split evenly across processes.

    Keeping the global batch fixed means a 1-process and an N-process run take the same optimiser
    steps on the same samples, so changing ``trainer=`` never changes the experiment.
    """

    def __init__(self, batch_size: int, num_workers: int = 0) -> None:
        super().__init__()
        if batch_size <= 0:
            raise ValueError(f"batch_size must be positive, got {batch_size}")
        self.batch_size = batch_size
        self.num_workers = num_workers

    @property
    def world_size(self) -> int:
        trainer = self.trainer
        return 1 if trainer is None else max(1, trainer.world_size)

    @property
    def per_device_batch_size(self) -> int:
        """The global batch divided by the number of processes (an error if it does not divide)."""
        if self.batch_size % self.world_size:
            raise ValueError(
                f"data.batch_size={self.batch_size} (the global batch) is not divisible by the "
                f"world size {self.world_size}; choose a multiple of {self.world_size}."
            )
        return self.batch_size // self.world_size
