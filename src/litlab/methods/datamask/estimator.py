"""The grouped policy-gradient (score-function) estimator of ∇_θ E_{m∼Bernoulli(σ(θ))}[J(m)].

For independent Bernoulli masks ∇_θ log p(m) = m − σ(θ), so with G masks of one group (one shard)

    ĝ = (1/G)·Σ_g A_g·(m_g − σ(θ)),

where A_g is J_g minus a baseline: ``none`` (A = J: unbiased, high variance), ``loo`` (leave-one-out mean
of the other G − 1 rewards: still unbiased, since the baseline is independent of m_g) or ``group`` (the
group mean, GRPO-style: biased by the factor (G − 1)/G). ``normalize`` divides A by the group's standard
deviation (a per-shard step size; Adam rescales each coordinate anyway), which makes ĝ scale-free but no
longer unbiased.
"""

from __future__ import annotations

import torch

from litlab.core.errors import ConfigError

BASELINES = ("none", "loo", "group")


def advantages(rewards: torch.Tensor, baseline: str = "loo", normalize: bool = False) -> torch.Tensor:
    """``(..., G)`` A_g from ``rewards (..., G)`` (see the module docstring)."""
    if baseline not in BASELINES:
        raise ConfigError(f"baseline={baseline!r}; choose one of {', '.join(BASELINES)}")
    groups = rewards.shape[-1]
    if baseline != "none" and groups < 2:
        raise ConfigError(f"baseline={baseline!r} needs group_size >= 2, got {groups}")
    centred = rewards - rewards.mean(-1, keepdim=True)
    if baseline == "loo":  # J_g − mean of the others = G/(G − 1)·(J_g − group mean)
        adv = centred * (groups / (groups - 1))
    elif baseline == "group":
        adv = centred
    else:
        adv = rewards
    if normalize:  # the group's (unbiased) std, written out: ``Tensor.std`` is slow on many small groups
        std = (centred.square().sum(-1, keepdim=True) / max(groups - 1, 1)).sqrt()
        adv = adv / std.clamp_min(1e-12)
    return adv


def policy_gradient(
    masks: torch.Tensor,
    rewards: torch.Tensor,
    probs: torch.Tensor,
    baseline: str = "loo",
    normalize: bool = False,
) -> torch.Tensor:
    """``(..., n)`` ĝ. ``masks (..., G, n)`` drawn from ``probs (..., n)`` = σ(θ); ``rewards (..., G)``."""
    adv = advantages(rewards, baseline, normalize)
    groups = masks.shape[-2]
    weighted = (masks.mT @ adv.unsqueeze(-1)).squeeze(-1)  # Σ_g A_g·m_g; fastest on (..., n, G) storage
    return (weighted - adv.sum(-1, keepdim=True) * probs) / groups
