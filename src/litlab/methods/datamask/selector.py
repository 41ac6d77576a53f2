"""DATAMASK's selector: Bernoulli mask logits over all documents, learned shard by shard (all shards in one
batched step) with the grouped policy-gradient estimator and Adam, then the top r·N documents by logit.

The pool is cut into random shards of ``shard_size`` documents; each shard is one group: G masks are drawn
over it, scored by the joint objective of that shard (``mask_objective``) and turned into its gradient.
A shard's kernel Kᵢⱼ = (eᵢ·eⱼ)² is built once, so a step costs O(G·N·shard_size) and memory is
O(N·shard_size): N = 10⁶ with shards of 8 holds 32 MB of kernels. Sharding is what makes the estimator
work at all: one reward per mask carries about √(G/n) signal per document, so groups must be small.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field, replace

import torch

from litlab.core.errors import ConfigError
from litlab.methods.datamask.estimator import policy_gradient
from litlab.methods.datamask.objective import Context, joint_weights, mask_objective, second_moment_kernel

# Rows per block of the context's two O(N·d²) products (1 MB at d = 64). Whole-pool temporaries (N, d)
# are fresh allocations that page-fault and fall out of cache on every refresh; blocks stay in cache.
CONTEXT_BLOCK = 4096


@dataclass
class Selection:
    """A selection: ``indices (k,)`` into the pool, the final ``logits (N,)`` (None for baselines), wall
    ``seconds`` and the mean sampled objective per step (``history``)."""

    indices: torch.Tensor
    seconds: float
    logits: torch.Tensor | None = None
    history: list[float] = field(default_factory=list)


def budget(n_documents: int, ratio: float) -> int:
    """The number of documents a selection at ``ratio`` holds: round(r·N), at least 1."""
    if not 0 < ratio <= 1:
        raise ConfigError(f"ratio={ratio} must be in (0, 1]")
    return max(1, round(ratio * n_documents))


def make_shards(n_documents: int, shard_size: int, generator: torch.Generator) -> torch.Tensor:
    """``(S, shard_size)`` a random partition of ``range(N)`` into shards; the last is padded with N."""
    if shard_size < 2:
        raise ConfigError(f"shard_size={shard_size} must be at least 2")
    n_shards = math.ceil(n_documents / shard_size)
    order = torch.randperm(n_documents, generator=generator)
    padding = torch.full((n_shards * shard_size - n_documents,), n_documents, dtype=torch.long)
    return torch.cat([order, padding]).view(n_shards, shard_size)


@dataclass
class ShardedPool:
    """The pool cut into shards: ``index (S, n)`` (N marks padding), ``valid``, ``quality (S, n)``,
    ``embeddings (S, n, d)``, ``kernel (S, n, n)`` and ``n_valid (S,)``."""

    index: torch.Tensor
    valid: torch.Tensor
    quality: torch.Tensor
    embeddings: torch.Tensor
    kernel: torch.Tensor
    n_valid: torch.Tensor

    @classmethod
    def build(
        cls, quality: torch.Tensor, embeddings: torch.Tensor, shard_size: int, generator: torch.Generator
    ) -> ShardedPool:
        """Shard ``quality (N,)`` and unit ``embeddings (N, d)``; padding: quality 0, a zero embedding."""
        n = len(quality)
        if embeddings.shape[0] != n:
            raise ConfigError(f"quality has {n} documents but embeddings {embeddings.shape[0]}")
        index = make_shards(n, shard_size, generator)
        valid = index < n
        # ``index_select``, then zero the padding: 4× faster than indexing a padded copy
        rows = index.flatten().clamp(max=n - 1)
        quality = quality.float().index_select(0, rows).view(index.shape).mul_(valid)
        sharded = embeddings.float().index_select(0, rows).view(*index.shape, -1).mul_(valid.unsqueeze(-1))
        return cls(index, valid, quality, sharded, second_moment_kernel(sharded), valid.sum(1).float())

    def context(self, probs: torch.Tensor) -> Context:
        """Each shard's context: every other shard at its expected selection (weights ``probs (S, n)``).
        Costs O(N·d²) per call, once per step rather than per mask."""
        p = probs * self.valid
        flat_e, flat_p = self.embeddings.flatten(0, 1), p.flatten()
        rows, weights = flat_e.split(CONTEXT_BLOCK), flat_p.split(CONTEXT_BLOCK)
        # Σ pⱼeⱼeⱼᵀ over the pool, (d, d), accumulated block by block: Eᵀ·(pE) is the same product as
        # (pE)ᵀ·E, 1.8× faster; blocks keep the (rows, d) temporaries in cache (see ``CONTEXT_BLOCK``)
        moment = flat_e.new_zeros(flat_e.shape[1], flat_e.shape[1])
        for block, block_p in zip(rows, weights):
            moment.addmm_(block.T, block * block_p[:, None])
        diag = torch.empty_like(flat_p)  # eᵢᵀ(Σ pⱼeⱼeⱼᵀ)eᵢ
        for block, out in zip(rows, diag.split(CONTEXT_BLOCK)):
            torch.sum((block @ moment).mul_(block), 1, out=out)
        diag = diag.view_as(p)
        own = (self.kernel @ p.unsqueeze(-1)).squeeze(-1)  # eᵢᵀ(Σ_{j∈s} pⱼeⱼeⱼᵀ)eᵢ
        frob_sq = moment.square().sum() - 2 * (p * diag).sum(1) + (p * own).sum(1)
        return Context(*self._counts(p), frob_sq, diag - own)

    def refresh_counts(self, context: Context, probs: torch.Tensor) -> Context:
        """``context`` with each shard's size and quality sum at ``probs`` (O(N), cheap enough for every
        step); ‖C‖² and the cross terms, O(N·d²), stay as ``context`` computed them. Between full refreshes
        a stale size is what hurts most: the budget term and both means divide by it."""
        size, quality_sum = self._counts(probs * self.valid)
        return replace(context, size=size, quality_sum=quality_sum)

    def _counts(self, p: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Each shard's context size and quality sum: the pool's minus the shard's, at weights ``p``."""
        weighted = p * self.quality
        return p.sum() - p.sum(1), weighted.sum() - weighted.sum(1)


def sample_masks(
    probs: torch.Tensor, valid: torch.Tensor, group_size: int, generator: torch.Generator | None
):
    """``(S, G, n)`` float masks, mᵢ ∼ Bernoulli(pᵢ) independently, 0 on padding; a view of ``(S, n, G)``
    storage, the layout ``mask_objective``'s batched product is fastest with.

    Each draw is a 16-bit uniform (four cut from one random 64-bit integer; about half the cost of ``rand``):
    mᵢ = [uᵢ < round(65536·pᵢ)], so P(mᵢ = 1) is pᵢ to within 2⁻¹⁶ (float32 ``rand`` resolves 2⁻²⁴)."""
    shards, n = probs.shape
    count = shards * group_size * n
    words = torch.randint(-(2**63), 2**63 - 1, ((count + 3) // 4,), generator=generator, dtype=torch.int64)
    draws = words.view(torch.int16)[:count].view(shards, n, group_size)
    threshold = (probs * 65536).round().sub_(32768).clamp_(max=32767).where(valid, -32768)
    masks = torch.empty(draws.shape, dtype=probs.dtype)  # compared straight into floats: 3× faster
    return torch.lt(draws, threshold.unsqueeze(-1), out=masks).mT


def datamask_select(
    quality: torch.Tensor,
    embeddings: torch.Tensor,
    ratio: float = 0.1,
    *,
    lam: float = 0.5,
    mu: float = 1.0,
    shard_size: int = 8,
    group_size: int = 8,
    steps: int = 30,
    lr: float = 0.35,
    baseline: str = "loo",
    normalize: bool = True,
    context: bool = True,
    context_every: int = 6,
    seed: int = 0,
) -> Selection:
    """Learn mask logits θ (init logit(r), so the expected size is the budget) by Adam ascent on the
    grouped policy gradient of J, and return the top ``round(r·N)`` documents by θ.

    ``quality (N,)``; ``embeddings (N, d)`` with unit rows. See ``mask_objective`` for λ, μ and r. With
    ``context`` each shard's masks are scored joined to the other shards' expected selection (so the
    reward is the global objective); without it each shard is scored alone. The context (O(N·d²)) is
    refreshed every ``context_every`` steps; in between its sizes and quality sums are updated every step
    (O(N)) and only its second-moment terms are a few steps stale.
    """
    if steps < 0 or group_size < 1 or lr <= 0 or context_every < 1:
        raise ConfigError(
            f"steps={steps}, group_size={group_size}, lr={lr}, context_every={context_every} must be "
            ">= 0, >= 1, > 0, >= 1"
        )
    start = time.perf_counter()
    k = budget(len(quality), ratio)
    generator = torch.Generator().manual_seed(seed)
    pool = ShardedPool.build(quality, embeddings, shard_size, generator)
    theta = torch.full(pool.quality.shape, math.log(ratio / (1 - ratio)) if ratio < 1 else 10.0)
    theta.requires_grad_(True)
    optimizer = torch.optim.Adam([theta], lr=lr, maximize=True, fused=True)  # fused: 2× faster step on CPU
    history, rest = [], None
    weights = None if context else joint_weights(pool.quality, pool.kernel)
    for step in range(steps):
        with torch.no_grad():
            probs = torch.sigmoid(theta)
            masks = sample_masks(probs, pool.valid, group_size, generator)
            if context and step % context_every == 0:
                rest = pool.context(probs)
                weights = joint_weights(pool.quality, pool.kernel, rest)
            elif context:
                rest = pool.refresh_counts(rest, probs)
            n_valid = float(len(quality)) if context else pool.n_valid[:, None]
            rewards = mask_objective(masks, pool.quality, pool.kernel, lam, mu, ratio, n_valid, rest, weights)
            theta.grad = policy_gradient(masks, rewards, probs, baseline, normalize)
        optimizer.step()
        history.append(rewards.mean().item())
    logits = torch.full((len(quality) + 1,), -math.inf)
    logits[pool.index.flatten()] = theta.detach().flatten().where(pool.valid.flatten(), -math.inf)
    logits = logits[:-1]
    indices = logits.topk(k).indices
    return Selection(indices, time.perf_counter() - start, logits, history)
