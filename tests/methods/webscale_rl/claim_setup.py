"""The claim tests' shared configuration and shipped-model check (kept beside them so both claim tests, the
study's and the checker's, build the same testbed)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors.torch import load_file

from litlab.core.paths import shipped_data_dir
from litlab.methods.webscale_rl import study
from litlab.task import TaskContext

CLAIM = {
    "n_entities": 20,
    "pages_per_entity": 5,
    "permute": True,
    "background_entities": 20,
    "shots": 3,
    "noise": 0.2,
    "vocab_size": 512,
    "arch": {"hidden_size": 128, "num_layers": 2, "num_heads": 4},
    "block_size": 128,
    "doc_batch_size": 8,
    "qa_length": 48,
    "batch_size": 16,
    "lr": 3e-3,
    "finetune_lr": 3e-4,
    "pretrain_steps": 1000,
    "pretrain_eval_every": 1000,
    "steps": 100,
    "sft_warmup_steps": 0,
    "eval_every": 25,
    "grpo_batch_size": 4,
    "grpo": {
        "group_size": 16,
        "max_new_tokens": 8,
        "temperature": 1.5,
        "lr": 1e-4,
        "kl_coef": 0.0,
        "clip_eps": 0.2,
        "num_iterations": 1,
    },
}


def assert_shipped_model_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seed: int, cfg: dict[str, Any]
) -> None:
    """A cold cache reads seed ``seed``'s pretrained model from ``data/webscale_rl``: fails when the
    pretraining settings, version or cache keying change without a re-shipped model."""
    monkeypatch.setenv("LITLAB_CACHE", str(tmp_path / "cache"))
    ctx = TaskContext.local(tmp_path / "run")

    def no_training(*args: object, **kwargs: object) -> None:
        raise AssertionError("the claim seed's base model was trained instead of read from data/webscale_rl")

    monkeypatch.setattr(ctx.fitter, "fit", no_training)
    run = study.pretrained(ctx, seed, cfg)
    (shipped,) = shipped_data_dir("webscale_rl").glob(f"pretrained_seed{seed}-*.safetensors")
    stored = load_file(shipped)
    assert all(torch.equal(stored[f"model.{k}"], v) for k, v in run["base"].state_dict().items())
    assert run["curve"] == study.curve_points(stored) and run["curve"][-1]["tokens"] > 0
