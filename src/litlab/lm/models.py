"""Tiny LLaMA language models built offline from transformers' ``LlamaConfig``, and any local HF checkpoint.

Two objectives share the same decoder blocks (RMSNorm, RoPE, SwiGLU, multi-head attention):

- causal: ``LlamaForCausalLM``; the logits at position i predict token i + 1.
- masked diffusion (LLaDA, Nie et al. 2025): the same blocks with bidirectional attention; the logits at
  position i predict the clean token at i wherever the input holds the mask token.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import torch
from torch.nn import functional as F
from transformers import (
    AutoConfig,
    AutoModelForCausalLM,
    LlamaConfig,
    LlamaForCausalLM,
    PretrainedConfig,
    PreTrainedModel,
    PreTrainedTokenizerBase,
)

from litlab.core.errors import LitlabError
from litlab.datamodules.tokenizers import load_tokenizer

OBJECTIVES = ("causal", "masked_diffusion")


def llama_config(
    vocab_size: int,
    hidden_size: int = 128,
    num_layers: int = 4,
    num_heads: int = 4,
    num_kv_heads: int | None = None,
    intermediate_size: int | None = None,
    max_position_embeddings: int = 512,
    tie_word_embeddings: bool = True,
    initializer_range: float = 0.02,
    attn_implementation: str = "sdpa",
    bos_token_id: int | None = None,
    eos_token_id: int | None = None,
    pad_token_id: int | None = None,
    mask_token_id: int | None = None,
) -> LlamaConfig:
    """A LLaMA config; ``intermediate_size`` defaults to 8/3·hidden rounded up to a multiple of 32 (LLaMA's
    SwiGLU width). ``mask_token_id`` is stored for the masked-diffusion objective and its sampler."""
    if intermediate_size is None:
        intermediate_size = 32 * math.ceil(8 * hidden_size / 3 / 32)
    return LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=hidden_size,
        intermediate_size=intermediate_size,
        num_hidden_layers=num_layers,
        num_attention_heads=num_heads,
        num_key_value_heads=num_kv_heads or num_heads,
        max_position_embeddings=max_position_embeddings,
        tie_word_embeddings=tie_word_embeddings,
        initializer_range=initializer_range,
        attn_implementation=attn_implementation,
        bos_token_id=bos_token_id,
        eos_token_id=eos_token_id,
        pad_token_id=pad_token_id,
        mask_token_id=mask_token_id,
    )


class LlamaForMaskedDiffusion(LlamaForCausalLM):
    """LLaMA blocks with bidirectional attention; ``logits: (B, L, V)`` predict the clean token at each place.

    ``config.is_causal = False`` makes transformers build a bidirectional mask, and every attention module's
    ``is_causal`` flag is cleared so that SDPA never falls back to its causal kernel. The flag is saved in
    ``config.json``, which is how ``load_pretrained`` recognises a masked-diffusion checkpoint.
    """

    def __init__(self, config: LlamaConfig) -> None:
        config.is_causal = False
        super().__init__(config)
        for module in self.modules():
            if hasattr(module, "is_causal"):
                module.is_causal = False


def is_masked_diffusion(config: PretrainedConfig) -> bool:
    """True for configs saved by a masked-diffusion model (bidirectional attention)."""
    return getattr(config, "is_causal", True) is False


def build_lm(config: LlamaConfig, objective: str = "causal") -> PreTrainedModel:
    """A freshly initialised model for ``objective`` ('causal' or 'masked_diffusion')."""
    if objective not in OBJECTIVES:
        raise ValueError(f"objective={objective!r}; choose one of {', '.join(OBJECTIVES)}")
    if objective == "masked_diffusion":
        if getattr(config, "mask_token_id", None) is None:
            raise ValueError(
                "a masked-diffusion model needs config.mask_token_id (the tokenizer's mask token)"
            )
        return LlamaForMaskedDiffusion(config)
    config.is_causal = True
    return LlamaForCausalLM(config)


def load_pretrained(path: str | os.PathLike) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """The model and tokenizer saved in a local folder (``save_pretrained`` format, e.g. a run's hf_model/).

    Masked-diffusion checkpoints come back as ``LlamaForMaskedDiffusion``; anything else loads through
    ``AutoModelForCausalLM``, so any local causal HF model works.
    """
    path = Path(path).expanduser()
    if not (path / "config.json").is_file():
        raise LitlabError(
            f"model.pretrained_path={path} has no config.json; point it at a folder written by "
            "save_pretrained, e.g. outputs/lm/pretrain_shakespeare/<run id>/hf_model"
        )
    config = AutoConfig.from_pretrained(str(path), local_files_only=True)
    if is_masked_diffusion(config):
        if config.model_type != "llama":
            raise LitlabError(
                f"{path}: masked-diffusion checkpoints must be LLaMA models, got {config.model_type}"
            )
        model = LlamaForMaskedDiffusion.from_pretrained(str(path), local_files_only=True)
    else:
        model = AutoModelForCausalLM.from_pretrained(str(path), local_files_only=True)
    return model, load_tokenizer(path)


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
