"""The default recipe's model ships with litlab: a cold cache copies it instead of training."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from litlab.core.paths import shipped_data_dir
from litlab.methods.sparsed import model as sparsed_model


def test_a_cold_cache_gets_the_shipped_model_of_the_default_recipe(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Fails when the recipe or its version changes without a re-shipped model (the key would not match)."""
    monkeypatch.setenv("LITLAB_CACHE", str(tmp_path))

    def no_training(*args: object) -> None:
        raise AssertionError("the default recipe was trained instead of copied from the shipped model")

    monkeypatch.setattr(sparsed_model, "train", no_training)
    model, tokenizer = sparsed_model.pretrained()
    shipped = load_file(next(shipped_data_dir("sparsed").glob("*/hf_model/model.safetensors")))
    loaded = model.state_dict()
    assert all(torch.equal(loaded[name], value) for name, value in shipped.items())
    assert model.config.num_hidden_layers == sparsed_model.Recipe().num_layers and tokenizer is not None
    assert not any(tmp_path.rglob("hf_model.partial"))
