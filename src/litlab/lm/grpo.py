"""GRPO (Shao et al. 2024, DeepSeekMath) in plain torch: group-normalised advantages, the clipped surrogate
with a k3 KL penalty, and rollouts of a causal LM scored by a TRL-style reward function.

One GRPO step: sample G completions per prompt (``grpo_rollout``), score them, normalise the rewards within
each prompt's group (``group_advantages``), then minimise ``grpo_loss`` on the policy's log-probs of the
sampled tokens (``policy_logprobs``) for one or more inner updates. ``GRPOModule`` (``grpo_module``) wraps
this in a LightningModule.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from litlab.core.errors import LitlabError
from litlab.lm.generation import sample_text, token_logprobs

RewardFn = Callable[..., torch.Tensor | Sequence[float]]


def group_advantages(rewards: torch.Tensor, *, scale: bool = True, eps: float = 1e-4) -> torch.Tensor:
    """``(P, G)`` advantages of ``rewards (P, G)``: r − mean over the group, divided by the group's
    (Bessel-corrected, as in TRL) standard deviation + ``eps`` when ``scale``."""
    if rewards.ndim != 2 or rewards.shape[1] < 2:
        raise LitlabError(
            f"rewards must be (prompts, group) with a group of at least 2, got {tuple(rewards.shape)}"
        )
    centred = rewards - rewards.mean(1, keepdim=True)
    return centred / (rewards.std(1, keepdim=True) + eps) if scale else centred


def all_tie_fraction(rewards: torch.Tensor) -> torch.Tensor:
    """The share of prompts whose G rewards are all equal (zero advantage: no learning signal)."""
    return (rewards == rewards[:, :1]).all(1).float().mean()


def grpo_loss(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    *,
    clip_eps: float = 0.2,
    ref_logp: torch.Tensor | None = None,
    kl_coef: float = 0.0,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """The GRPO loss and its statistics (``clip_fraction``, ``kl``, ``ratio``: means over the masked tokens).

    Per token: −min(ρ·A, clip(ρ, 1 − ε, 1 + ε)·A) + β·KL with ρ = exp(logp − old_logp) and the k3 estimator
    KL = exp(ref − logp) − (ref − logp) − 1; averaged over each sequence's ``mask``ed tokens, then over
    sequences (DeepSeekMath; TRL's ``loss_type="grpo"``). ``logp``, ``old_logp``, ``ref_logp``, ``mask``:
    ``(N, T)``; ``advantages``: ``(N,)``. Gradients flow through ``logp`` only.
    """
    if kl_coef and ref_logp is None:
        raise LitlabError("kl_coef > 0 needs the reference log-probs (ref_logp=...)")
    mask = mask.to(logp.dtype)
    advantage = advantages[:, None].to(logp.dtype)
    ratio = torch.exp(logp - old_logp.detach())
    clipped = ratio.clamp(1 - clip_eps, 1 + clip_eps)
    per_token = -torch.minimum(ratio * advantage, clipped * advantage)
    if ref_logp is not None:
        delta = ref_logp.detach() - logp
        kl = torch.exp(delta) - delta - 1
    else:
        kl = torch.zeros_like(logp)
    if kl_coef:
        per_token = per_token + kl_coef * kl
    loss = ((per_token * mask).sum(1) / mask.sum(1).clamp_min(1)).mean()
    outside = ((ratio < 1 - clip_eps) & (advantage < 0)) | ((ratio > 1 + clip_eps) & (advantage > 0))
    count = mask.sum().clamp_min(1)
    with torch.no_grad():
        stats = {
            "clip_fraction": (outside * mask).sum() / count,
            "kl": (kl * mask).sum() / count,
            "ratio": (ratio * mask).sum() / count,
        }
    return loss, stats


@dataclass
class Rollout:
    """G sampled completions of each of P prompts (prompt i → rows i·G .. i·G + G − 1).

    Attributes:
        sequences, attention_mask: ``(N, P_len + T)`` left-padded prompt then completion (as ``Generation``).
        completion_ids, completion_mask: ``(N, T)`` the sampled tokens and the ones the loss counts.
        old_logp: ``(N, T)`` their log-probs under the sampling policy at ``temperature`` (0 after the end).
        rewards: ``(P, G)``; advantages: ``(N,)`` group-normalised.
        completions: the N completions as text; temperature: the sampling temperature.
    """

    sequences: torch.Tensor
    attention_mask: torch.Tensor
    completion_ids: torch.Tensor
    completion_mask: torch.Tensor
    old_logp: torch.Tensor
    rewards: torch.Tensor
    advantages: torch.Tensor
    completions: list[str]
    temperature: float


def grpo_rollout(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    prompts: Sequence[str],
    group_size: int,
    reward_fn: RewardFn,
    *,
    max_new_tokens: int = 32,
    temperature: float = 1.0,
    scale: bool = True,
    columns: Mapping[str, Sequence] | None = None,
    seed: int = 0,
    **sample_options: object,
) -> Rollout:
    """Sample ``group_size`` completions per prompt (``litlab.lm.sample_text``, seeded) and score them with
    ``reward_fn(prompts, completions, **columns)`` (TRL's signature: every list has one entry per completion,
    each prompt and each column value repeated ``group_size`` times); ``sample_options`` reach ``sample``."""
    if temperature <= 0:
        raise LitlabError(f"GRPO samples its groups: temperature must be > 0, got {temperature}")
    with torch.no_grad():
        texts, gen = sample_text(
            model,
            tokenizer,
            prompts,
            max_new_tokens,
            num_samples=group_size,
            temperature=temperature,
            seed=seed,
            **sample_options,
        )
    rows = gen.prompt_index.tolist()
    repeated = {key: [list(values)[i] for i in rows] for key, values in (columns or {}).items()}
    rewards = torch.as_tensor(reward_fn([prompts[i] for i in rows], texts, **repeated), dtype=torch.float32)
    if rewards.shape != (len(texts),):
        raise LitlabError(
            f"reward_fn must return one reward per completion ({len(texts)}), got {tuple(rewards.shape)}"
        )
    rewards = rewards.to(gen.logprobs.device).view(len(prompts), group_size)
    return Rollout(
        sequences=gen.sequences,
        attention_mask=gen.attention_mask,
        completion_ids=gen.completion_ids,
        completion_mask=gen.completion_mask,
        old_logp=gen.logprobs,
        rewards=rewards,
        advantages=group_advantages(rewards, scale=scale).flatten(),
        completions=texts,
        temperature=temperature,
    )


def policy_logprobs(model: PreTrainedModel, rollout: Rollout) -> torch.Tensor:
    """``(N, T)``: the model's log-probs of the rollout's completion tokens at its sampling temperature,
    with gradients (0 after each completion's end)."""
    logp = token_logprobs(model, rollout.sequences, rollout.attention_mask, temperature=rollout.temperature)
    return logp[:, -rollout.completion_ids.shape[1] :] * rollout.completion_mask
