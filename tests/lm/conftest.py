"""Fixtures of the LM tests: tiny LLaMA and GPT-2 models for the session tokenizer (seconds to build)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedModel, PreTrainedTokenizerBase

from litlab.lm.models import build_lm, llama_config


@pytest.fixture
def tiny_lm(tokenizer: PreTrainedTokenizerBase) -> Callable[..., PreTrainedModel]:
    """``tiny_lm(objective, seed, **arch)``: a seeded 2-layer d=32 LLaMA in eval mode for ``tokenizer``."""

    def make(objective: str = "causal", seed: int = 0, **arch: object) -> PreTrainedModel:
        torch.manual_seed(seed)
        options = {"hidden_size": 32, "num_layers": 2, "num_heads": 4, **arch}
        config = llama_config(
            len(tokenizer),
            eos_token_id=tokenizer.eos_token_id,
            bos_token_id=tokenizer.eos_token_id,
            pad_token_id=tokenizer.pad_token_id,
            mask_token_id=tokenizer.mask_token_id,
            **options,
        )
        return build_lm(config, objective).eval()

    return make


@pytest.fixture
def gpt2_lm(tokenizer: PreTrainedTokenizerBase) -> PreTrainedModel:
    """A seeded 2-layer GPT-2 (learned absolute positions) built locally from a config, in eval mode."""
    torch.manual_seed(0)
    config = GPT2Config(
        vocab_size=len(tokenizer), n_embd=32, n_layer=2, n_head=4, n_positions=128, initializer_range=0.2,
        bos_token_id=tokenizer.eos_token_id, eos_token_id=tokenizer.eos_token_id,
    )  # fmt: skip
    return GPT2LMHeadModel(config).eval()
