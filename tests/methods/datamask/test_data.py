"""The selection pool: composition, unit embeddings, held-out documents kept out, signals that disagree."""

import pytest
import torch

from litlab.core.errors import ConfigError
from litlab.datamodules.selection import DOMAINS, SelectionDataModule, make_pool, near_duplicate


@pytest.fixture(scope="module")
def pool():
    return make_pool(n_documents=2000, seed=3)


def test_composition_and_shapes(pool):
    assert len(pool) == 2000 == len(pool.quality) == len(pool.embeddings)
    assert torch.bincount(pool.kind, minlength=3).tolist() == [1500, 200, 300]
    assert (pool.domain[pool.kind == 2] == -1).all() and (pool.domain[pool.kind == 1] == 0).all()
    torch.testing.assert_close(pool.embeddings.norm(dim=1), torch.ones(2000))
    assert pool.quality.min() >= 0 and pool.quality.max() <= 1


def test_heldout_documents_are_not_in_the_pool(pool):
    texts = set(pool.texts)
    assert set(pool.heldout) == set(DOMAINS)
    assert all(len(docs) == 100 and not texts & set(docs) for docs in pool.heldout.values())


def test_quality_ranks_noise_last_and_clusters_at_the_top(pool):
    """Clean documents outscore noise; the top 10 % by quality is dominated by one or two domains."""
    clean, noise = pool.quality[pool.kind == 0].mean(), pool.quality[pool.kind == 2].mean()
    assert clean > noise + 0.2
    top = pool.domain[pool.quality.topk(200).indices]
    assert torch.bincount(top + 1, minlength=5).max() > 100


def test_bad_shares_and_sizes_are_one_clear_error():
    with pytest.raises(ConfigError, match="shares"):
        make_pool(n_documents=400, shares=(0.5, 0.5, 0.5, 0.0))
    with pytest.raises(ConfigError, match="Shakespeare"):
        make_pool(n_documents=100_000)


def test_near_duplicate_edits_few_characters():
    import random

    text = "To be, or not to be, that is the question. " * 5
    copy = near_duplicate(text, random.Random(0))
    assert len(copy) == len(text) and 0 < sum(a != b for a, b in zip(text, copy)) <= 0.02 * len(text)


def test_datamodule_spec_loaders_and_seeding():
    """The DataModule's pool is make_pool's with the same arguments (same seed, same pool)."""
    data = SelectionDataModule(n_documents=400, steps_per_epoch=3, seed=1)
    spec = data.data_spec()
    again = make_pool(n_documents=400, seed=1)
    assert data.pool.texts == again.texts and torch.equal(spec["quality"], again.quality)
    assert spec["quality"].shape == (400,) and spec["embeddings"].shape == (400, 64)
    assert len(list(data.train_dataloader())) == 3 and len(list(data.test_dataloader())) == 1
