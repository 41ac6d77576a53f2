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
from typing import Any

import torch
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

    def forward(self, *args: Any, labels: torch.Tensor | None = None, **kwargs: Any) -> Any:
        """``LlamaForCausalLM.forward`` without its ``labels=`` loss, which is a shifted causal loss: a
        masked-diffusion model is scored by ``masked_diffusion_loss`` or ``diffusion_nll_terms``."""
        if labels is not None:
            raise LitlabError(
                "a masked-diffusion model has no labels= loss (transformers' would be a shifted causal one); "
                "use litlab.lm.masked_diffusion_loss or litlab.lm.diffusion_nll_terms"
            )
        return super().forward(*args, **kwargs)


def is_masked_diffusion(config: PretrainedConfig) -> bool:
    """True for configs saved by a masked-diffusion model (bidirectional attention)."""
    return getattr(config, "is_causal", True) is False


def require_causal(model: PreTrainedModel, what: str) -> None:
    """A LitlabError when ``model`` is a masked-diffusion model, which ``what`` cannot score or sample."""
    if is_masked_diffusion(model.config):
        raise LitlabError(
            f"{what} needs a causal LM, got a masked-diffusion model; use litlab.lm.evaluate_text, "
            "diffusion_nll_terms or diffusion_generate for it"
        )


def require_diffusion(model: PreTrainedModel, what: str) -> None:
    """A LitlabError when ``model`` is not a masked-diffusion model."""
    if not is_masked_diffusion(model.config):
        raise LitlabError(f"{what} needs a masked-diffusion model (config.is_causal=false), got a causal LM")


def position_ids(attention_mask: torch.Tensor) -> torch.Tensor:
    """``(B, L)``: each token's position counted over the non-padding tokens of its row (0 on left
    padding), what models with absolute positions (GPT-2) need under left padding."""
    return (attention_mask.long().cumsum(-1) - 1).clamp_min(0)


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
