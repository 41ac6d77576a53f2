"""The sharded selector: partition, budget, learning the objective on a planted pool, the LightningModule."""

import pytest
import torch

from litlab.core.errors import ConfigError
from litlab.methods.datamask import selector
from litlab.methods.datamask.baselines import random_select
from litlab.methods.datamask.module import MaskSelector
from litlab.methods.datamask.objective import subset_objective
from litlab.methods.datamask.selector import ShardedPool, budget, datamask_select, make_shards


def _planted(n: int = 1000, d: int = 8, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Quality ~ U(0, 1); half the documents point along one direction (a dense cluster), half anywhere."""
    gen = torch.Generator().manual_seed(seed)
    emb = torch.randn(n, d, generator=gen)
    emb[: n // 2] = emb[: n // 2] * 0.05 + torch.eye(d)[0]
    return torch.rand(n, generator=gen), emb / emb.norm(dim=1, keepdim=True)


def test_shards_partition_the_pool_with_padding():
    shards = make_shards(103, 10, torch.Generator().manual_seed(0))
    assert shards.shape == (11, 10)
    assert sorted(shards[shards < 103].tolist()) == list(range(103))
    assert (shards == 103).sum() == 7


def test_context_matches_the_other_shards_summed_in_float64(monkeypatch):
    """Each shard's context (size, quality sum, ‖C‖², eᵢᵀCeᵢ with C the other shards' Σ pⱼeⱼeⱼᵀ) equals a
    direct float64 sum, with blocks of 7 rows that straddle shards and a short last block."""
    monkeypatch.setattr(selector, "CONTEXT_BLOCK", 7)
    quality, emb = _planted(103)
    pool = ShardedPool.build(quality, emb, 8, torch.Generator().manual_seed(0))
    probs = torch.rand(pool.quality.shape, generator=torch.Generator().manual_seed(1))
    context = pool.context(probs)
    p, e = (probs * pool.valid).double(), pool.embeddings.double()
    own = torch.einsum("sn,snd,sne->sde", p, e, e)  # each shard's Σ pⱼeⱼeⱼᵀ
    rest = own.sum(0) - own
    float32 = {"rtol": 1e-5, "atol": 1e-4}  # the selector's precision
    torch.testing.assert_close(context.size.double(), p.sum() - p.sum(1), **float32)
    weighted = p * pool.quality.double()
    torch.testing.assert_close(context.quality_sum.double(), weighted.sum() - weighted.sum(1), **float32)
    torch.testing.assert_close(context.frobenius_sq.double(), rest.square().sum((1, 2)), **float32)
    cross = torch.einsum("snd,sde,sne->sn", e, rest, e)
    torch.testing.assert_close(context.cross.double(), cross, **float32)


@pytest.mark.parametrize(("n", "ratio"), [(1000, 0.1), (997, 0.25), (50, 0.5)])
def test_selection_size_matches_budget(n, ratio):
    quality, emb = _planted(n)
    selection = datamask_select(quality, emb, ratio, steps=5, shard_size=32, group_size=4)
    assert len(selection.indices) == budget(n, ratio) == round(ratio * n)
    assert len(set(selection.indices.tolist())) == len(selection.indices)
    assert selection.logits.shape == (n,) and torch.isfinite(selection.logits).all()


def test_logits_start_at_the_budget_and_learn_the_objective():
    """With λ = 0.5 the learned selection beats random on J, avoids the dense cluster and prefers quality."""
    quality, emb = _planted()
    untrained = datamask_select(quality, emb, 0.1, steps=0)
    assert torch.sigmoid(untrained.logits).sub(0.1).abs().max() < 1e-6
    learned = datamask_select(quality, emb, 0.1, steps=60, seed=1)
    ours = subset_objective(learned.indices, quality, emb, 0.5)
    chance = subset_objective(random_select(1000, 0.1, seed=1).indices, quality, emb, 0.5)
    assert ours["objective"] > chance["objective"] + 0.05
    assert (learned.indices < 500).float().mean() < 0.3
    assert quality[learned.indices].mean() > 0.6


def test_bad_settings_are_one_clear_error():
    quality, emb = _planted(100)
    with pytest.raises(ConfigError, match="ratio"):
        datamask_select(quality, emb, 1.5)
    with pytest.raises(ConfigError, match="shard_size"):
        datamask_select(quality, emb, 0.1, shard_size=1)
    with pytest.raises(ConfigError, match="embeddings"):
        datamask_select(quality, emb[:50], 0.1)
    with pytest.raises(ConfigError, match="baseline"):
        MaskSelector(torch.optim.Adam, baseline="mean")


def test_module_surrogate_gradient_is_minus_the_estimator():
    """The LightningModule's loss gradient equals −ĝ of the estimator on the same masks (the torch RNG
    is reseeded so both draw the same masks)."""
    quality, emb = _planted(200)
    module = MaskSelector(torch.optim.Adam, shard_size=50, group_size=6)
    module.bind_data({"quality": quality, "embeddings": emb})
    with torch.no_grad():
        module.logits.normal_(generator=torch.Generator().manual_seed(3))
    module.log = lambda *args, **kwargs: None
    torch.manual_seed(7)
    module.training_step(None, 0).backward()
    from litlab.methods.datamask.estimator import policy_gradient
    from litlab.methods.datamask.objective import mask_objective
    from litlab.methods.datamask.selector import sample_masks

    pool, probs = module.pool, torch.sigmoid(module.logits.detach())
    torch.manual_seed(7)
    masks = sample_masks(probs, pool.valid, 6, None)
    rewards = mask_objective(masks, pool.quality, pool.kernel, 0.5, 1.0, 0.1, 200.0, pool.context(probs))
    torch.testing.assert_close(module.logits.grad, -policy_gradient(masks, rewards, probs, "loo", True))
    assert len(module.selected_indices()) == 20
    assert module.logits.shape == (4, 50)
