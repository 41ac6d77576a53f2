"""A 600-id teacher BPE (the session's shakespeare tokenizer), students of its first N merges and a small
random teacher LM whose next-token distributions are far from uniform (initializer range 0.5)."""

from __future__ import annotations

import pytest
import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from litlab.datamodules.tokenizers import subset_tokenizer
from litlab.lm.models import build_lm, llama_config
from litlab.methods.crosstok.pair import SubsetPair


@pytest.fixture(scope="session")
def teacher_lm(tokenizer: PreTrainedTokenizerBase) -> PreTrainedModel:
    torch.manual_seed(0)
    config = llama_config(len(tokenizer), hidden_size=32, num_layers=1, num_heads=2, initializer_range=0.5)
    return build_lm(config, "causal").eval()


@pytest.fixture(scope="session")
def pairs(tokenizer: PreTrainedTokenizerBase) -> dict[int, SubsetPair]:
    """Students of 0 (bytes), 100 and all of the teacher's merges."""
    n_all = len(tokenizer) - 3 - 256
    return {n: SubsetPair(tokenizer, subset_tokenizer(tokenizer, n)) for n in (0, 100, n_all)}
