"""The LightningModule that trains a causal LM with GRPO (``litlab.lm.grpo``) on batches of prompts.

A batch is ``{"prompt": [str, ...], <column>: [...], ...}`` (``prompt_loader`` builds one from records);
the other columns reach the reward function, as in TRL. Every ``num_iterations`` training steps a new
rollout is sampled from the batch's prompts; the steps in between update on that rollout again (their own
batch is not used), with the rollout's sampling log-probs as the old policy, as TRL does.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

import lightning as L
import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from litlab.core.errors import ConfigError, LitlabError
from litlab.lm.grpo import RewardFn, Rollout, all_tie_fraction, grpo_loss, grpo_rollout, policy_logprobs
from litlab.lm.models import load_pretrained, require_causal


def collate_records(records: Sequence[Mapping[str, Any]]) -> dict[str, list[Any]]:
    """A batch of records as one list per key (strings stay strings)."""
    return {key: [record[key] for record in records] for key in records[0]}


def prompt_loader(
    records: Sequence[Mapping[str, Any]], batch_size: int, seed: int = 0
) -> torch.utils.data.DataLoader:
    """A shuffled (seeded) loader of prompt records (each with a ``prompt`` and the reward's columns)."""
    if not records or any("prompt" not in r for r in records):
        raise LitlabError("every prompt record needs a 'prompt' field")
    generator = torch.Generator().manual_seed(seed)
    return torch.utils.data.DataLoader(
        list(records), batch_size=batch_size, shuffle=True, collate_fn=collate_records, generator=generator
    )


class GRPOModule(L.LightningModule):
    """GRPO on a causal LM: ours or any local HF checkpoint (``pretrained_path``), or a ``model`` and
    ``tokenizer`` given directly.

    Args:
        reward_fn: ``reward_fn(prompts, completions, **columns) -> (N,)`` rewards (TRL's signature).
        group_size: completions sampled per prompt (G).
        max_new_tokens, temperature: sampling; ``stop_strings`` end a completion early.
        clip_eps: the PPO clip range ε; kl_coef: β of the k3 KL penalty to a frozen copy of the initial
            policy (made only when β > 0).
        num_iterations: gradient updates per rollout (μ in DeepSeekMath).
        lr, weight_decay: AdamW (betas 0.9, 0.99).
        scale_rewards: divide the group-centred rewards by the group's standard deviation.
        seed: the first rollout's sampling seed (later rollouts add their index).
    """

    def __init__(
        self,
        reward_fn: RewardFn,
        pretrained_path: str | None = None,
        model: PreTrainedModel | None = None,
        tokenizer: PreTrainedTokenizerBase | None = None,
        group_size: int = 8,
        max_new_tokens: int = 32,
        temperature: float = 1.0,
        clip_eps: float = 0.2,
        kl_coef: float = 0.0,
        num_iterations: int = 1,
        lr: float = 1e-5,
        weight_decay: float = 0.0,
        scale_rewards: bool = True,
        stop_strings: Sequence[str] = (),
        seed: int = 0,
    ) -> None:
        super().__init__()
        if (pretrained_path is None) == (model is None):
            raise ConfigError("give exactly one of model.pretrained_path or a model (with its tokenizer)")
        if model is not None and tokenizer is None:
            raise ConfigError("a model given directly needs its tokenizer")
        if group_size < 2:
            raise ConfigError(f"model.group_size={group_size}: GRPO needs at least 2 samples per prompt")
        if num_iterations < 1:
            raise ConfigError(f"model.num_iterations={num_iterations} must be at least 1")
        if kl_coef < 0 or not 0 < clip_eps < 1:
            raise ConfigError(f"need kl_coef ≥ 0 and 0 < clip_eps < 1, got {kl_coef}, {clip_eps}")
        if pretrained_path is not None:
            model, tokenizer = load_pretrained(pretrained_path)
        require_causal(model, "GRPOModule")
        self.lm, self.tokenizer, self.reward_fn = model, tokenizer, reward_fn
        self.ref_lm = copy.deepcopy(model).requires_grad_(False).eval() if kl_coef > 0 else None
        self.group_size, self.max_new_tokens, self.temperature = group_size, max_new_tokens, temperature
        self.clip_eps, self.kl_coef, self.num_iterations = clip_eps, kl_coef, num_iterations
        self.lr, self.weight_decay, self.scale_rewards = lr, weight_decay, scale_rewards
        self.stop_strings, self.seed = tuple(stop_strings), seed
        self.rollout: Rollout | None = None
        self.n_updates = self.n_rollouts = 0

    def logged_metrics(self) -> list[str]:
        """The keys this module logs (``litlab.contract``)."""
        keys = ("loss", "reward", "all_tie", "kl", "clip_fraction", "ratio", "completion_tokens")
        return [f"train/{k}" for k in keys] + ["val/reward"]

    def sample_rollout(
        self, batch: Mapping[str, Sequence[Any]], group_size: int, temperature: float
    ) -> Rollout:
        """A scored rollout of the batch's prompts under the current policy (sampling in eval mode)."""
        columns = {key: values for key, values in batch.items() if key != "prompt"}
        was_training = self.lm.training
        self.lm.eval()
        try:
            return grpo_rollout(
                self.lm,
                self.tokenizer,
                list(batch["prompt"]),
                group_size,
                self.reward_fn,
                max_new_tokens=self.max_new_tokens,
                temperature=temperature,
                scale=self.scale_rewards,
                columns=columns,
                seed=self.seed + self.n_rollouts,
                stop_strings=self.stop_strings,
            )
        finally:
            self.n_rollouts += 1
            self.lm.train(was_training)

    def training_step(self, batch: Mapping[str, Sequence[Any]], batch_idx: int) -> torch.Tensor:
        if self.rollout is None or self.n_updates % self.num_iterations == 0:
            self.rollout = self.sample_rollout(batch, self.group_size, self.temperature)
        self.n_updates += 1
        rollout = self.rollout
        logp = policy_logprobs(self.lm, rollout)
        ref_logp = None
        if self.ref_lm is not None:
            with torch.no_grad():
                ref_logp = policy_logprobs(self.ref_lm, rollout)
        loss, stats = grpo_loss(
            logp,
            rollout.old_logp,
            rollout.advantages,
            rollout.completion_mask,
            clip_eps=self.clip_eps,
            ref_logp=ref_logp,
            kl_coef=self.kl_coef,
        )
        size = len(batch["prompt"])
        values = {
            "loss": loss.detach(),
            "reward": rollout.rewards.mean(),
            "all_tie": all_tie_fraction(rollout.rewards),
            "completion_tokens": rollout.completion_mask.sum(1).float().mean(),
            **stats,
        }
        for key, value in values.items():
            self.log(
                f"train/{key}", value, on_step=True, on_epoch=False, prog_bar=key == "reward", batch_size=size
            )
        return loss

    @torch.no_grad()
    def validation_step(self, batch: Mapping[str, Sequence[Any]], batch_idx: int) -> None:
        """The mean reward of the policy's completions at the training temperature (2 per prompt)."""
        rollout = self.sample_rollout(batch, 2, self.temperature)
        self.log("val/reward", rollout.rewards.mean(), batch_size=len(batch["prompt"]))

    def configure_optimizers(self) -> torch.optim.Optimizer:
        if not any(p.requires_grad for p in self.lm.parameters()):
            raise LitlabError("the policy has no trainable parameters")
        return torch.optim.AdamW(
            [p for p in self.lm.parameters() if p.requires_grad],
            lr=self.lr,
            betas=(0.9, 0.99),
            weight_decay=self.weight_decay,
        )
