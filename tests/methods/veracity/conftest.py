"""A tiny random LM over the ProntoQA vocabulary and a few chains, shared by the fast tests."""

from __future__ import annotations

import pytest
import torch

from litlab.datamodules.prontoqa import ProblemConfig, generate_problems
from litlab.lm.models import build_lm
from litlab.methods.veracity.module import substrate_config


@pytest.fixture(scope="module")
def tiny_lm() -> torch.nn.Module:
    torch.manual_seed(0)
    return build_lm(substrate_config({"hidden_size": 32, "num_layers": 1, "num_heads": 2})).eval()


@pytest.fixture(scope="module")
def chains() -> dict[str, torch.Tensor]:
    return generate_problems(6, ProblemConfig(depth_min=2, depth_max=3), seed=4)
