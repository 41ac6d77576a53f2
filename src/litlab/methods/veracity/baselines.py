"""The baselines VS is compared with: per-step judging by the LM, random tags and all-true tags."""

from __future__ import annotations

import torch
from torch import nn

from litlab.methods.veracity.scoring import Batch, fill_tags, tag_ids, tag_logits


@torch.no_grad()
def per_step_judge(model: nn.Module, batch: Batch) -> torch.Tensor:
    """Greedy per-step tagging: step k is judged false when p(false tag) > p(true tag) given the context,
    the steps so far and the earlier judgements (no answer). One pass per step position: ``(B, S)``."""
    slots = batch["slots"]
    B, S = slots.shape
    length = int(slots.max()) + 1
    tokens = batch["tokens"][:, :length]
    ids = tag_ids(batch)
    judged = torch.ones(B, S, dtype=torch.bool)
    for k in range(S):
        inputs = fill_tags(tokens, slots, torch.where(judged, ids[:, :1], ids[:, 1:2])[:, None])[:, 0]
        logp = tag_logits(model, inputs, slots[:, k : k + 1], ids)[:, 0]
        judged[:, k] = (logp[:, 0] >= logp[:, 1]) | (slots[:, k] < 0)
    return judged


def random_tags(slots: torch.Tensor, false_rate: float, seed: int) -> torch.Tensor:
    """Each step false with probability ``false_rate`` (the gold rate: the informed random baseline)."""
    generator = torch.Generator().manual_seed(seed)
    return (torch.rand(slots.shape, generator=generator) >= false_rate) | (slots < 0)


def all_true(slots: torch.Tensor) -> torch.Tensor:
    """Every step tagged true (what a reader who trusts the chain concludes)."""
    return torch.ones(slots.shape, dtype=torch.bool)
