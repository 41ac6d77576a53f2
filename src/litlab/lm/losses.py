"""Summed NLL terms of a batch (nats, predicted tokens, their UTF-8 bytes) for causal and masked-diffusion
LMs: next-token cross-entropy, LLaDA's training objective, and its multi-draw evaluation estimate.

Batches are ``{"input_ids", "labels"[, "attention_mask", "byte_counts", "block_mask"]}`` (``(B, L)``
tensors, labels unshifted with -100 ignored; ``byte_counts`` the bytes each token accounts for, else the
tokenizer's per-token table is used; a ``block_mask`` reaches models prepared by ``use_block_attention``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
from torch.nn import functional as F
from transformers import PreTrainedModel

from litlab.core.errors import LitlabError
from litlab.datamodules.text import IGNORE_INDEX
from litlab.lm.models import is_masked_diffusion, position_ids, require_causal, require_diffusion


@dataclass
class NLLTerms:
    """Summed NLL (nats) with the number of predicted tokens and their UTF-8 bytes; adds up over batches."""

    nll: torch.Tensor
    tokens: torch.Tensor
    bytes: torch.Tensor

    def __add__(self, other: NLLTerms) -> NLLTerms:
        return NLLTerms(self.nll + other.nll, self.tokens + other.tokens, self.bytes + other.bytes)

    def summary(self) -> dict[str, float]:
        """``loss`` (nats per token), ``ppl`` = exp(loss), ``bpb`` = NLL / (ln 2 · bytes), and the counts."""
        loss = float(self.nll) / max(int(self.tokens), 1)
        return {
            "loss": loss,
            "ppl": math.exp(min(loss, 50.0)),
            "bpb": float(self.nll) / math.log(2) / max(int(self.bytes), 1),
            "tokens": int(self.tokens),
            "bytes": int(self.bytes),
        }


def model_inputs(batch: dict[str, Any]) -> dict[str, Any]:
    """The forward keywords of a batch besides ``input_ids``: the attention mask with the positions it
    implies (left padding must not shift absolute positions), and a block mask when there is one."""
    inputs: dict[str, Any] = {}
    if batch.get("attention_mask") is not None:
        inputs["attention_mask"] = batch["attention_mask"]
        inputs["position_ids"] = position_ids(batch["attention_mask"])
    if batch.get("block_mask") is not None:
        inputs["block_mask"] = batch["block_mask"]
    return inputs


def _byte_total(
    batch: dict[str, Any], token_bytes: torch.Tensor, ids: torch.Tensor, where: slice
) -> torch.Tensor:
    """UTF-8 bytes of the tokens ``ids`` at ``batch[:, where]`` (``byte_counts`` if the batch has them)."""
    if batch.get("byte_counts") is not None:
        return batch["byte_counts"][:, where][ids != IGNORE_INDEX].sum()
    return token_bytes.to(ids.device)[ids[ids != IGNORE_INDEX]].sum()


def causal_token_nll(model: PreTrainedModel, batch: dict[str, Any]) -> torch.Tensor:
    """``(B, L − 1)``: the cross-entropy of each next token ``labels[:, 1:]`` given ``logits[:, :-1]`` (HF
    convention), 0 where the label is -100. Gradients flow."""
    require_causal(model, "causal_token_nll")
    input_ids = batch["input_ids"]
    targets = batch.get("labels", input_ids)[:, 1:]
    logits = model(input_ids=input_ids, **model_inputs(batch)).logits[:, :-1]
    flat = F.cross_entropy(
        logits.reshape(-1, logits.shape[-1]).float(), targets.reshape(-1), ignore_index=IGNORE_INDEX,
        reduction="none",
    )  # fmt: skip
    return flat.view(targets.shape)


def causal_nll_terms(model: PreTrainedModel, batch: dict[str, Any], token_bytes: torch.Tensor) -> NLLTerms:
    """Next-token cross-entropy of ``labels[:, 1:]``, summed, with its token and byte counts."""
    targets = batch.get("labels", batch["input_ids"])[:, 1:]
    nll = causal_token_nll(model, batch).sum()
    valid = targets != IGNORE_INDEX
    return NLLTerms(nll, valid.sum(), _byte_total(batch, token_bytes, targets, slice(1, None)))


def forward_process(
    input_ids: torch.Tensor,
    mask_token_id: int,
    eps: float = 1e-3,
    eligible: torch.Tensor | None = None,
    generator: torch.Generator | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """LLaDA's forward (noising) process on ``input_ids: (B, L)``.

    Per sequence t ~ U(0, 1) and p = (1 − eps)·t + eps; each eligible token is replaced by the mask token
    with probability p. Returns ``(noisy (B, L), masked (B, L) bool, p_mask (B, L))``.
    """
    batch, length = input_ids.shape
    t = torch.rand(batch, device=input_ids.device, generator=generator)
    p_mask = ((1 - eps) * t + eps)[:, None].expand(batch, length)
    masked = torch.rand(batch, length, device=input_ids.device, generator=generator) < p_mask
    if eligible is not None:
        masked &= eligible
    return torch.where(masked, mask_token_id, input_ids), masked, p_mask


def masked_token_nll(
    logits: torch.Tensor, targets: torch.Tensor, masked: torch.Tensor, p_mask: torch.Tensor
) -> torch.Tensor:
    """Σ over masked positions of CE(logits_i, target_i) / p_i: the LLaDA estimate (in nats) of the NLL
    bound summed over all eligible tokens. ``logits: (B, L, V)``, the rest ``(B, L)``; returns a scalar."""
    ce = F.cross_entropy(logits[masked].float(), targets[masked], reduction="none")
    return (ce / p_mask[masked]).sum()


def masked_diffusion_loss(
    logits: torch.Tensor, targets: torch.Tensor, masked: torch.Tensor, p_mask: torch.Tensor, n_tokens: int
) -> torch.Tensor:
    """LLaDA's training loss: ``masked_token_nll / n_tokens`` with n_tokens = B·L in pretraining (the number
    of eligible tokens in general), i.e. the per-token upper bound on the negative log-likelihood."""
    return masked_token_nll(logits, targets, masked, p_mask) / max(n_tokens, 1)


def _eligible(batch: dict[str, Any], mask_token_id: int | None, what: str) -> tuple[torch.Tensor, ...]:
    if mask_token_id is None:
        raise LitlabError(f"{what} needs mask_token_id (the tokenizer's mask token)")
    input_ids = batch["input_ids"]
    return input_ids, batch.get("labels", input_ids) != IGNORE_INDEX


def diffusion_loss_terms(
    model: PreTrainedModel,
    batch: dict[str, Any],
    token_bytes: torch.Tensor,
    mask_token_id: int | None,
    eps: float = 1e-3,
    generator: torch.Generator | None = None,
) -> NLLTerms:
    """LLaDA's training estimate: one draw of the forward process (``forward_process``, from
    ``generator``), Σ_masked CE / p over the tokens with a label; tokens and bytes count every such token.
    Tokens without a label (a prompt) stay visible and are never masked."""
    require_diffusion(model, "diffusion_loss_terms")
    input_ids, eligible = _eligible(batch, mask_token_id, "diffusion_loss_terms")
    noisy, masked, p_mask = forward_process(input_ids, mask_token_id, eps, eligible, generator)
    logits = model(input_ids=noisy, **model_inputs(batch)).logits
    nll = masked_token_nll(logits, input_ids, masked, p_mask)
    labels = torch.where(eligible, input_ids, IGNORE_INDEX)
    return NLLTerms(nll, eligible.sum(), _byte_total(batch, token_bytes, labels, slice(None)))


def diffusion_row_nll(
    model: PreTrainedModel,
    batch: dict[str, Any],
    mask_token_id: int | None,
    n_draws: int = 8,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """``(B,)`` float64: each sequence's masked-diffusion NLL bound over its tokens with a label, the
    evaluation estimate averaged over ``n_draws`` mask draws.

    LLaDA's likelihood estimator (its Algorithm 3): per draw, l of the n eligible tokens of a sequence are
    masked uniformly at random and Σ_masked CE is weighted n / l; with l uniform on {1..n} its expectation
    is the same bound as the training objective, with lower variance. The draws are stratified: draw k uses
    l = ⌈(k + u)/K · n⌉ with one u ~ U(0, 1) per sequence, so a fixed K gives a low-spread estimate. Tokens
    without a label stay visible. Masks come from ``generator`` (seed it for a reproducible score).
    """
    require_diffusion(model, "diffusion_row_nll")
    if n_draws < 1:
        raise LitlabError(f"n_draws must be at least 1, got {n_draws}")
    input_ids, eligible = _eligible(batch, mask_token_id, "diffusion_row_nll")
    rows, length = input_ids.shape
    device = input_ids.device
    n = eligible.sum(1)
    u = torch.rand(rows, device=device, generator=generator)
    inputs = model_inputs(batch)
    total = torch.zeros(rows, device=device, dtype=torch.float64)
    row_index = torch.arange(rows, device=device)[:, None].expand(rows, length)
    for draw in range(n_draws):
        l = torch.ceil((draw + u) / n_draws * n).clamp(min=1).minimum(n.clamp(min=1))
        keys = torch.rand(rows, length, device=device, generator=generator).masked_fill(~eligible, 2.0)
        masked = (keys.argsort(1).argsort(1) < l[:, None]) & eligible
        logits = model(input_ids=torch.where(masked, mask_token_id, input_ids), **inputs).logits
        ce = F.cross_entropy(logits[masked].float(), input_ids[masked], reduction="none").double()
        per_row = torch.zeros(rows, device=device, dtype=torch.float64).index_add_(0, row_index[masked], ce)
        total += per_row * n / l
    return total / n_draws


def diffusion_nll_terms(
    model: PreTrainedModel,
    batch: dict[str, Any],
    token_bytes: torch.Tensor,
    mask_token_id: int | None,
    n_draws: int = 8,
    generator: torch.Generator | None = None,
) -> NLLTerms:
    """``diffusion_row_nll`` summed over the batch, with the token and byte counts of the scored tokens."""
    nll = diffusion_row_nll(model, batch, mask_token_id, n_draws, generator).sum()
    input_ids, eligible = _eligible(batch, mask_token_id, "diffusion_nll_terms")
    labels = torch.where(eligible, input_ids, IGNORE_INDEX)
    return NLLTerms(nll, eligible.sum(), _byte_total(batch, token_bytes, labels, slice(None)))


def nll_terms(
    model: PreTrainedModel,
    batch: dict[str, Any],
    token_bytes: torch.Tensor,
    mask_token_id: int | None = None,
    eps: float = 1e-3,
    generator: torch.Generator | None = None,
) -> NLLTerms:
    """The training NLL terms of a batch for the model's kind: ``causal_nll_terms`` for a causal LM,
    ``diffusion_loss_terms`` (one draw of LLaDA's objective) for a masked-diffusion one."""
    if is_masked_diffusion(model.config):
        return diffusion_loss_terms(model, batch, token_bytes, mask_token_id, eps, generator)
    return causal_nll_terms(model, batch, token_bytes)
