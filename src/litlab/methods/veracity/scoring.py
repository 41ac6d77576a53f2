"""The Veracity Search reward: the LM's joint log-likelihood of per-step veracity tags and the correct answer.

A chain's rows hold one tag slot after every step (``slots``) and end in ``answer <y*> <eos>``. For a tag
assignment v (True = the step is true) the reward is

    R(v) = Σ_k log p(tag_k = v_k | x, s_≤k, v_<k) + log p("answer y*" | x, s, v)

(the proof's own tokens are conditioned on, not scored). Every assignment of a chain has the same length
and positions, so all of them are scored in one batched forward pass.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from litlab.datamodules.prontoqa import FALSE_TAG, TRUE_TAG

Batch = dict[str, torch.Tensor]
ScoreFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]  # (rows (b,), assignments (b, K, S)) -> (b, K)


def fill_tags(tokens: torch.Tensor, slots: torch.Tensor, tags: torch.Tensor) -> torch.Tensor:
    """``tokens (B, L)`` with each valid slot (``slots (B, S)``, -1 = none) set to ``tags (B, K, S)``
    token ids: ``(B, K, L)``."""
    B, K, S = tags.shape
    out = tokens[:, None].expand(B, K, tokens.shape[1]).clone()
    index = slots.clamp_min(0)[:, None].expand(B, K, S)
    current = out.gather(2, index)
    out.scatter_(2, index, torch.where((slots >= 0)[:, None], tags, current))
    return out


def predicted_logprobs(model: nn.Module, inputs: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """``log p(inputs[r, t] | inputs[r, :t])`` at ``positions (N, P)`` (t ≥ 1) of ``inputs (N, L)``."""
    logits = model(input_ids=inputs).logits
    rows = torch.arange(len(inputs), device=inputs.device)[:, None]
    picked = logits[rows, positions - 1].float().log_softmax(-1)
    return picked.gather(2, inputs[rows, positions][..., None])[..., 0]


def tag_logits(model: nn.Module, inputs: torch.Tensor, slots: torch.Tensor) -> torch.Tensor:
    """``(N, S, 2)`` log-probabilities of (true tag, false tag) at every slot, renormalised over the two."""
    logits = model(input_ids=inputs).logits
    rows = torch.arange(len(inputs), device=inputs.device)[:, None]
    pair = logits[rows, (slots - 1).clamp_min(0)][..., [TRUE_TAG, FALSE_TAG]].float()
    return pair.log_softmax(-1)


@torch.no_grad()
def assignment_scores(
    model: nn.Module, batch: Batch, assignments: torch.Tensor, answer_term: bool = True, chunk: int = 1024
) -> torch.Tensor:
    """R(v), ``(B, K)``, for ``assignments (B, K, S)`` (bool, True = step true) of the chains of ``batch``.

    ``answer_term=False`` drops log p(answer | …) (the ablation that scores the tags alone).
    """
    slots, answer_pos = batch["slots"], batch["answer_pos"]
    B, K, S = assignments.shape
    length = int(answer_pos.max()) + 1
    tags = torch.where(assignments, TRUE_TAG, FALSE_TAG)
    inputs = fill_tags(batch["tokens"][:, :length], slots, tags).reshape(B * K, length)
    positions = torch.cat([slots.clamp_min(1), (answer_pos - 1)[:, None], answer_pos[:, None]], 1)
    weight = torch.cat([(slots >= 0).float(), torch.full((B, 2), float(answer_term))], 1)
    positions = positions[:, None].expand(B, K, S + 2).reshape(B * K, S + 2)
    logp = torch.cat(
        [
            predicted_logprobs(model, inputs[i : i + chunk], positions[i : i + chunk])
            for i in range(0, B * K, chunk)
        ]
    )
    return (logp.reshape(B, K, S + 2) * weight[:, None]).sum(-1)


def lm_score_fn(model: nn.Module, batch: Batch, answer_term: bool = True, chunk: int = 1024) -> ScoreFn:
    """:func:`assignment_scores` as the search calls it: rewards of assignments of the chains ``rows``."""

    def score(rows: torch.Tensor, assignments: torch.Tensor) -> torch.Tensor:
        sub = {key: batch[key][rows] for key in ("tokens", "slots", "answer_pos")}
        return assignment_scores(model, sub, assignments, answer_term, chunk)

    return score
