"""Distillation losses against sparse teacher targets over the student vocabulary (plain torch).

``logp: (N, V)`` student log-probs; targets ``ids, probs: (N, k)`` (the teacher's top-k) or the label's
teacher probability ``q_y: (N,)``. Each returns ``(N,)`` per-token losses in nats.
"""

from __future__ import annotations

import torch


def log_rest(logp: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """``(N,)`` log(1 − Σ_{i ∈ ids} p_i), computed as a log-sum-exp over the other tokens (stable)."""
    excluded = torch.zeros_like(logp).scatter(-1, ids, -torch.inf)
    return torch.logsumexp(logp + excluded, dim=-1)


def sparse_kl(logp: torch.Tensor, ids: torch.Tensor, probs: torch.Tensor) -> torch.Tensor:
    """The paper's top-k + rest-bucket cross-entropy: −Σ_i q_i log p_i − q_rest log(1 − Σ_i p_i), with
    q_rest = 1 − Σ_i q_i (the KL up to the teacher's entropy, which has no gradient)."""
    q_rest = (1 - probs.sum(-1)).clamp_min(0)
    rest = torch.where(q_rest > 0, q_rest * log_rest(logp, ids), 0.0)  # k = V: no rest bucket at all
    return -(probs * logp.gather(-1, ids)).sum(-1) - rest


def label_only(logp: torch.Tensor, labels: torch.Tensor, q_label: torch.Tensor) -> torch.Tensor:
    """ALM-style binary cross-entropy on the label token alone: −q_y log p_y − (1 − q_y) log(1 − p_y)."""
    ids = labels[:, None]
    return -q_label * logp.gather(-1, ids)[:, 0] - (1 - q_label) * log_rest(logp, ids)
