"""Fixtures of the LM tests: tiny LLaMA models for the session tokenizer (seconds to build)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

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
