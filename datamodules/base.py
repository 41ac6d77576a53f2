"""What every data family shares: a global batch fixed across world sizes, batch-gathering datasets, loaders
whose shuffling a resumed run replays exactly, and the train/val/test regression DataModule."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import lightning as L
import torch
from torch.utils.data import BatchSampler, DataLoader, Dataset, Sampler, SequentialSampler


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


def batch_rows(indices: Sequence[int]) -> torch.Tensor | slice:
    """A batch's row index: a slice for a run of consecutive rows (from :class:`ConsecutiveBatchSampler`;
    tensors indexed by it are views, with no index list to convert), else a LongTensor."""
    if isinstance(indices, range) and indices.step == 1:
        return slice(indices.start, indices.stop)
    return torch.as_tensor(indices, dtype=torch.long)


class TensorBatchDataset(Dataset):
    """Row-aligned tensors whose batches are gathered with one index op (``__getitems__``), not per row.

    Full-batch training on thousands of points would otherwise spend most of each step collating rows;
    load it with ``batch_loader``, whose ``collate_fn`` passes the gathered batch through.
    """

    def __init__(self, *tensors: torch.Tensor) -> None:
        if not tensors or any(len(t) != len(tensors[0]) for t in tensors):
            raise ValueError("TensorBatchDataset needs one or more tensors with the same number of rows")
        self.tensors = tensors

    def __len__(self) -> int:
        return len(self.tensors[0])

    def __getitem__(self, index: int) -> tuple[torch.Tensor, ...]:
        return tuple(t[index] for t in self.tensors)

    def __getitems__(self, indices: Sequence[int]) -> tuple[torch.Tensor, ...]:
        index = batch_rows(indices)
        return tuple(t[index] for t in self.tensors)


class RepeatedDataset(Dataset):
    """``dataset`` seen ``repeats`` times in a row (item ``i`` is ``dataset[i % len(dataset)]``).

    A full-batch epoch of ``repeats`` identical steps: Lightning's fixed cost per epoch (hooks, logging,
    re-iterating the loader) is then paid once per ``repeats`` steps instead of once per step.
    """

    def __init__(self, dataset: Dataset, repeats: int) -> None:
        if repeats < 1:
            raise ValueError(f"repeats must be >= 1, got {repeats}")
        self.dataset, self.repeats = dataset, repeats

    def __len__(self) -> int:
        return len(self.dataset) * self.repeats

    def __getitems__(self, indices: Sequence[int]) -> object:
        n = len(self.dataset)
        if isinstance(indices, range) and indices.step == 1 and indices.start // n == (indices.stop - 1) // n:
            offset = indices.start // n * n  # a run within one repeat stays a run
            return self.dataset.__getitems__(range(indices.start - offset, indices.stop - offset))
        return self.dataset.__getitems__(torch.as_tensor(indices, dtype=torch.long) % n)


class ConsecutiveBatchSampler(BatchSampler):
    """PyTorch's ``BatchSampler`` that yields each batch of a sequential sampler as a ``range``.

    A full batch of thousands of rows is then a slice (:func:`batch_rows`) instead of a Python list
    converted to a tensor every step, about a tenth of a small model's step. Other samplers (a shuffle, or
    the distributed sampler Lightning injects through this class's ``BatchSampler`` signature) batch as
    usual; ``set_epoch`` reaches the wrapped sampler.
    """

    def __iter__(self) -> Iterator[Sequence[int]]:
        if not isinstance(self.sampler, SequentialSampler):
            yield from super().__iter__()
            return
        n = len(self.sampler)
        stop = n - n % self.batch_size if self.drop_last else n
        for start in range(0, stop, self.batch_size):
            yield range(start, min(start + self.batch_size, n))

    def set_epoch(self, epoch: int) -> None:
        if callable(getattr(self.sampler, "set_epoch", None)):
            self.sampler.set_epoch(epoch)


def batch_collate(batch: object) -> object:
    """The DataLoader ``collate_fn`` for datasets whose ``__getitems__`` already returns a whole batch."""
    return batch


class EpochShuffle(Sampler[int]):
    """A random order per epoch that depends only on ``(seed, epoch)``.

    Lightning calls ``set_epoch`` before each epoch, so a run resumed at epoch e draws exactly the batches
    an uninterrupted run draws there (a sampler that carries a generator across epochs would restart it).
    """

    def __init__(self, n: int, seed: int) -> None:
        self.n, self.seed, self.epoch = n, seed, 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __iter__(self) -> Iterator[int]:
        generator = torch.Generator().manual_seed(self.seed * 1_000_003 + self.epoch)
        return iter(torch.randperm(self.n, generator=generator).tolist())

    def __len__(self) -> int:
        return self.n


def batch_loader(dataset: Dataset, batch_size: int, shuffle: bool, seed: int, num_workers: int) -> DataLoader:
    """A DataLoader over a ``__getitems__`` dataset, shuffled per epoch (:class:`EpochShuffle`) if asked."""
    sampler = EpochShuffle(len(dataset), seed) if shuffle else SequentialSampler(dataset)
    return DataLoader(
        dataset,
        batch_sampler=ConsecutiveBatchSampler(sampler, batch_size, drop_last=False),
        collate_fn=batch_collate,
        num_workers=num_workers,
        persistent_workers=num_workers > 0,
    )


class RegressionDataModule(GlobalBatchDataModule):
    """Loaders shared by the regression families: ``train_set``/``val_set``/``test_set`` built in ``setup``.

    ``batch_size=None`` means full batch (``n_train``); ``eval_batch_size=None`` puts each whole
    evaluation set in one batch per process. Only mini-batches (batch < n_train) are shuffled, seeded.
    ``steps_per_epoch`` (full batch only) makes one epoch that many identical full-batch steps, so an
    experiment of N steps runs as N / steps_per_epoch epochs at a fraction of Lightning's per-epoch cost.
    """

    def __init__(
        self,
        n_train: int,
        batch_size: int | None,
        eval_batch_size: int | None,
        seed: int,
        num_workers: int,
        steps_per_epoch: int = 1,
    ) -> None:
        super().__init__(n_train if batch_size is None else batch_size, num_workers)
        if steps_per_epoch < 1 or (steps_per_epoch > 1 and self.batch_size < n_train):
            raise ValueError(
                f"steps_per_epoch={steps_per_epoch} must be >= 1, and > 1 only for full batches "
                "(batch_size=null)"
            )
        self.n_train = n_train
        self.eval_batch_size = eval_batch_size
        self.seed = seed
        self.steps_per_epoch = steps_per_epoch

    def train_dataloader(self) -> DataLoader:
        shuffle = self.batch_size < self.n_train
        dataset = (
            self.train_set
            if self.steps_per_epoch == 1
            else RepeatedDataset(self.train_set, self.steps_per_epoch)
        )
        return batch_loader(dataset, self.per_device_batch_size, shuffle, self.seed, self.num_workers)

    def _eval_loader(self, dataset: Dataset) -> DataLoader:
        size = len(dataset) if self.eval_batch_size is None else self.eval_batch_size
        return batch_loader(dataset, max(1, -(-size // self.world_size)), False, self.seed, self.num_workers)

    def val_dataloader(self) -> DataLoader:
        return self._eval_loader(self.val_set)

    def test_dataloader(self) -> DataLoader:
        return self._eval_loader(self.test_set)
