"""The LightningModule of a DATAMASK selection run (``litlab-train experiment=datamask/select``): the mask
logits θ are its parameters, a training step draws G masks per shard and descends the surrogate loss whose
gradient is minus the grouped policy gradient, and validation/test score the top-r·N selection on the
joint objective of the whole pool beside top-k quality, random and exact greedy.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import lightning as L
import torch
from torch.nn import functional as F

from litlab.core.errors import ConfigError, LitlabError
from litlab.methods.datamask.baselines import greedy_select, random_select, topk_quality
from litlab.methods.datamask.estimator import BASELINES, advantages
from litlab.methods.datamask.objective import mask_objective, subset_objective
from litlab.methods.datamask.selector import ShardedPool, budget, sample_masks


class MaskSelector(L.LightningModule):
    """Bernoulli mask logits over the pool, learned by the grouped policy gradient of
    J = λ·q̄ − (1 − λ)·D − μ·(|m|/n − r)² (see ``litlab.methods.datamask.objective``).

    Args:
        optimizer: a partial optimizer over the logits (Adam in the reconstruction).
        ratio: r, the fraction of the pool to keep.
        lam, mu: λ (quality vs diversity) and μ (budget penalty).
        shard_size, group_size: documents per shard; masks drawn per shard and step (G).
        baseline, normalize: the advantage (``none``, ``loo``, ``group``; divided by the group std).
        context, context_every: score each shard's masks joined to the other shards' expected selection
            (the global objective), refreshed every ``context_every`` steps; false scores shards alone.
        diversity: ablation; false sets λ = 1 (quality only), the objective of top-k quality selection.
        greedy_reference: score exact greedy at test time too (O(r·N²·d): turn off for large pools).
        seed: seeds the shard partition.
    """

    def __init__(
        self,
        optimizer: Callable[..., torch.optim.Optimizer],
        ratio: float = 0.1,
        lam: float = 0.5,
        mu: float = 1.0,
        shard_size: int = 64,
        group_size: int = 16,
        baseline: str = "loo",
        normalize: bool = True,
        context: bool = True,
        context_every: int = 10,
        diversity: bool = True,
        greedy_reference: bool = True,
        seed: int = 0,
    ) -> None:
        super().__init__()
        if not 0 < ratio < 1 or not 0 <= lam <= 1 or mu < 0:
            raise ConfigError(
                f"model.ratio={ratio}, model.lam={lam}, model.mu={mu}: need 0<r<1, 0<=λ<=1, μ>=0"
            )
        if baseline not in BASELINES or group_size < 2:
            raise ConfigError(
                f"model.baseline={baseline!r} (one of {', '.join(BASELINES)}), "
                f"model.group_size={group_size} (>=2)"
            )
        self.save_hyperparameters(logger=False, ignore=["optimizer"])
        self.optimizer_factory = optimizer
        self.ratio, self.mu, self.shard_size, self.group_size = ratio, mu, shard_size, group_size
        self.lam = lam if diversity else 1.0
        self.eval_lam = lam  # selections are always scored on the joint objective
        self.baseline, self.normalize, self.seed = baseline, normalize, seed
        self.greedy_reference = greedy_reference
        self.context, self.context_every = context, max(1, context_every)
        self._rest, self._steps = None, 0  # the cached context and the steps taken in this process
        self.pool: ShardedPool | None = None
        self.quality: torch.Tensor | None = None
        self.embeddings: torch.Tensor | None = None
        self.logits: torch.nn.Parameter | None = None

    def bind_data(self, spec: Mapping[str, Any]) -> None:
        """Shard the pool's ``quality (N,)`` and ``embeddings (N, d)``; θ starts at logit(r)."""
        self.quality, self.embeddings = spec["quality"].float(), spec["embeddings"].float()
        generator = torch.Generator().manual_seed(self.seed)
        self.pool = ShardedPool.build(self.quality, self.embeddings, self.shard_size, generator)
        self.logits = torch.nn.Parameter(
            torch.full(self.pool.quality.shape, math.log(self.ratio / (1 - self.ratio)))
        )

    def logged_metrics(self) -> list[str]:
        """The keys this module logs (``litlab.contract``)."""
        train = ["train/loss", "train/objective", "train/expected_fraction"]
        evals = [f"{s}/{k}" for s in ("val", "test") for k in ("objective", "quality", "diversity_norm")]
        baselines = [f"test/{b}_objective" for b in ("topk_quality", "random", "greedy")]
        return train + evals + baselines

    def _require(self) -> ShardedPool:
        if self.pool is None or self.logits is None:
            raise LitlabError(
                f"{type(self).__name__} has no pool yet: call bind_data(data.data_spec()) first"
            )
        return self.pool

    def selected_indices(self) -> torch.Tensor:
        """``(round(r·N),)`` the documents with the largest logits."""
        pool = self._require()
        flat = self.logits.detach().flatten().where(pool.valid.flatten(), -math.inf)
        chosen = flat.topk(budget(len(self.quality), self.ratio)).indices
        return pool.index.flatten()[chosen]

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        pool = self._require()
        probs = torch.sigmoid(self.logits.detach())
        masks = sample_masks(probs, pool.valid, self.group_size, None)
        rest = None
        if self.context:
            if self._rest is None or self._steps % self.context_every == 0:
                self._rest = pool.context(probs)
            else:
                self._rest = pool.refresh_counts(self._rest, probs)
            rest = self._rest
        self._steps += 1
        n_valid = float(len(self.quality)) if self.context else pool.n_valid[:, None]
        rewards = mask_objective(
            masks, pool.quality, pool.kernel, self.lam, self.mu, self.ratio, n_valid, rest
        )
        adv = advantages(rewards, self.baseline, self.normalize)
        log_prob = -F.binary_cross_entropy_with_logits(
            self.logits.unsqueeze(1).expand_as(masks), masks, reduction="none"
        )
        # ∂loss/∂θ = −(1/G)·Σ_g A_g·(m_g − σ(θ)): descending it ascends the policy gradient
        loss = -(adv.unsqueeze(-1) * log_prob * pool.valid.unsqueeze(1)).mean(1).sum()
        self.log("train/loss", loss)
        self.log("train/objective", rewards.mean())
        self.log("train/expected_fraction", (probs * pool.valid).sum() / pool.valid.sum())
        return loss

    def _score(self, stage: str, indices: torch.Tensor, prefix: str = "") -> None:
        for key, value in subset_objective(indices, self.quality, self.embeddings, self.eval_lam).items():
            if not prefix or key == "objective":
                self.log(f"{stage}/{prefix}{key}", value)

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        self._score("val", self.selected_indices())

    def test_step(self, batch: Any, batch_idx: int) -> None:
        self._score("test", self.selected_indices())
        self._score("test", topk_quality(self.quality, self.ratio).indices, "topk_quality_")
        self._score("test", random_select(len(self.quality), self.ratio, self.seed).indices, "random_")
        if self.greedy_reference:
            greedy = greedy_select(self.quality, self.embeddings, self.ratio, self.eval_lam, self.seed)
            self._score("test", greedy.indices, "greedy_")

    def configure_optimizers(self) -> torch.optim.Optimizer:
        self._require()
        return self.optimizer_factory(params=[self.logits])
