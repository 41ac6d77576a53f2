"""The Veracity Search reward: the LM's joint log-likelihood of per-step veracity tags and the correct answer.

A chain's rows hold one tag slot after every step (``slots``) and end in ``answer <y*> <eos>``. For a tag
assignment v (True = the step is true) the reward is

    R(v) = Σ_k log p(tag_k = v_k | x, s_≤k, v_<k) + log p("answer y*" | x, s, v)

(the proof's own tokens are conditioned on, not scored). Every assignment of a chain has the same length
and positions, so all of them are scored in one batched forward pass. A batch re-encoded for another
tokenizer (:mod:`litlab.methods.veracity.hf_scorer`) carries its own tag ids (``tag_ids``) and a
multi-token answer span (``answer_start`` .. ``answer_pos``); the closed vocabulary's are the defaults.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from litlab.datamodules.prontoqa import FALSE_TAG, TRUE_TAG, UNKNOWN_TAG

Batch = dict[str, torch.Tensor]
ScoreFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]  # (rows (b,), assignments (b, K, S)) -> (b, K)
CHAIN_KEYS = ("tokens", "slots", "answer_pos", "answer_start", "tag_ids")  # what scoring reads of a batch


def tag_ids(batch: Batch) -> torch.Tensor:
    """``(B, 3)`` ids of the (true, false, unknown) tag tokens of each chain (ours by default)."""
    if "tag_ids" in batch:
        return batch["tag_ids"]
    return torch.tensor([TRUE_TAG, FALSE_TAG, UNKNOWN_TAG]).expand(len(batch["tokens"]), 3)


def answer_start(batch: Batch) -> torch.Tensor:
    """``(B,)`` first token of ``answer y*`` (the closed vocabulary's is the word before ``answer_pos``)."""
    return batch["answer_start"] if "answer_start" in batch else batch["answer_pos"] - 1


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


def tag_logits(
    model: nn.Module, inputs: torch.Tensor, slots: torch.Tensor, pair: torch.Tensor
) -> torch.Tensor:
    """``(N, S, 2)`` log-probabilities of the tags ``pair (N, 2)`` (true, false ids) at every slot,
    renormalised over the two."""
    logits = model(input_ids=inputs).logits
    rows = torch.arange(len(inputs), device=inputs.device)[:, None]
    at = logits[rows, (slots - 1).clamp_min(0)]
    return at.gather(-1, pair[:, None, :2].expand(-1, slots.shape[1], 2)).float().log_softmax(-1)


@torch.no_grad()
def assignment_scores(
    model: nn.Module, batch: Batch, assignments: torch.Tensor, answer_term: bool = True, chunk: int = 1024
) -> torch.Tensor:
    """R(v), ``(B, K)``, for ``assignments (B, K, S)`` (bool, True = step true) of the chains of ``batch``.

    ``answer_term=False`` drops log p(answer | …) (the ablation that scores the tags alone).
    """
    slots, answer_pos, start = batch["slots"], batch["answer_pos"], answer_start(batch)
    B, K, S = assignments.shape
    length = int(answer_pos.max()) + 1
    ids = tag_ids(batch)
    tags = torch.where(assignments, ids[:, 0, None, None], ids[:, 1, None, None])
    inputs = fill_tags(batch["tokens"][:, :length], slots, tags).reshape(B * K, length)
    answer = start[:, None] + torch.arange(int((answer_pos - start).max()) + 1)  # the answer's tokens
    in_answer = (answer <= answer_pos[:, None]).float() * float(answer_term)
    positions = torch.cat([slots.clamp_min(1), answer.minimum(answer_pos[:, None])], 1)
    weight = torch.cat([(slots >= 0).float(), in_answer], 1)
    P = positions.shape[1]
    positions = positions[:, None].expand(B, K, P).reshape(B * K, P)
    logp = torch.cat(
        [
            predicted_logprobs(model, inputs[i : i + chunk], positions[i : i + chunk])
            for i in range(0, B * K, chunk)
        ]
    )
    return (logp.reshape(B, K, P) * weight[:, None]).sum(-1)


def lm_score_fn(model: nn.Module, batch: Batch, answer_term: bool = True, chunk: int = 1024) -> ScoreFn:
    """:func:`assignment_scores` as the search calls it: rewards of assignments of the chains ``rows``."""

    def score(rows: torch.Tensor, assignments: torch.Tensor) -> torch.Tensor:
        sub = {key: batch[key][rows] for key in CHAIN_KEYS if key in batch}
        return assignment_scores(model, sub, assignments, answer_term, chunk)

    return score
