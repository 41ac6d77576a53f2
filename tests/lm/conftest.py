"""Fixtures of the LM tests: a small shakespeare BPE and tiny LLaMA models (seconds to build)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from litlab.datamodules.text import text_file
from litlab.lm.models import build_lm, llama_config
from litlab.lm.tokenizers import cached_bpe


@pytest.fixture(scope="session")
def shakespeare() -> str:
    """The first 200 kB of tinyshakespeare."""
    return text_file("tinyshakespeare").read_text(encoding="utf-8")[:200_000]


@pytest.fixture(scope="session")
def lm_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A cache folder shared by the session (tokenizers are trained once)."""
    return tmp_path_factory.mktemp("litlab_cache")


@pytest.fixture(scope="session")
def tokenizer(shakespeare: str, lm_cache: Path) -> PreTrainedTokenizerBase:
    """A 600-id byte-level BPE trained on the shakespeare slice."""
    return cached_bpe([shakespeare], 600, lm_cache)


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
