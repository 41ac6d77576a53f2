"""Shared loaders: consecutive batches come as ranges (views, no index lists) and equal ordinary batching."""

from __future__ import annotations

import torch
from torch.utils.data import BatchSampler, SequentialSampler

from litlab.datamodules.base import (
    ConsecutiveBatchSampler,
    EpochShuffle,
    RepeatedDataset,
    TensorBatchDataset,
    batch_loader,
)


def _dataset(n: int = 10) -> TensorBatchDataset:
    x = torch.arange(2 * n, dtype=torch.float32).reshape(n, 2)
    return TensorBatchDataset(x, -x[:, 0])


def test_sequential_batches_are_ranges_with_the_batch_sampler_rows() -> None:
    sampler = SequentialSampler(range(10))
    for drop_last in (False, True):
        ours = list(ConsecutiveBatchSampler(sampler, 4, drop_last))
        assert all(isinstance(batch, range) for batch in ours)
        assert [list(b) for b in ours] == list(BatchSampler(sampler, 4, drop_last))


def test_shuffled_batches_are_lists_and_follow_the_epoch() -> None:
    shuffle = EpochShuffle(10, seed=3)
    batches = ConsecutiveBatchSampler(shuffle, 4, drop_last=False)
    first = list(batches)
    assert first == list(BatchSampler(EpochShuffle(10, seed=3), 4, drop_last=False))
    batches.set_epoch(1)
    assert shuffle.epoch == 1 and list(batches) != first


def test_a_range_gives_views_equal_to_gathered_rows() -> None:
    data = _dataset()
    x, y = data.__getitems__(range(2, 7))
    gathered = data.__getitems__([2, 3, 4, 5, 6])
    assert torch.equal(x, gathered[0]) and torch.equal(y, gathered[1])
    assert x.data_ptr() == data.tensors[0][2].data_ptr()  # a view: no copy


def test_repeated_full_batches_and_batches_across_repeats_pick_the_right_rows() -> None:
    data = _dataset(6)
    repeated = RepeatedDataset(data, 3)
    for batch_size in (6, 4):  # 4 makes batches that cross from one repeat into the next
        ours = [b[0] for b in batch_loader(repeated, batch_size, False, 0, 0)]
        rows = torch.arange(18) % 6
        expected = [data.tensors[0][rows[i : i + batch_size]] for i in range(0, 18, batch_size)]
        assert len(ours) == len(expected)
        assert all(torch.equal(a, b) for a, b in zip(ours, expected, strict=True))
