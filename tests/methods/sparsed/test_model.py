"""The default recipe's model ships with litlab: a cold cache copies it instead of training."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from litlab.core.paths import cache_dir, shipped_data_dir
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
    key = cache_dir("sparsed", sparsed_model.cache_key(sparsed_model.Recipe())).name
    shipped = load_file(shipped_data_dir("sparsed") / key / "hf_model" / "model.safetensors")
    loaded = model.state_dict()
    assert all(torch.equal(loaded[name], value) for name, value in shipped.items())
    assert model.config.num_hidden_layers == sparsed_model.Recipe().num_layers and tokenizer is not None
    assert not any(tmp_path.rglob("hf_model.partial"))


def test_a_recipe_with_an_init_fine_tunes_that_recipes_model_trained_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The chain trains from the bottom: the init's model is cached, then loaded as the fine-tune's start."""
    monkeypatch.setenv("LITLAB_CACHE", str(tmp_path))
    tiny = {"hidden_size": 16, "num_layers": 1, "num_heads": 2, "n_train": 8, "batch_size": 4, "steps": 2}
    base = sparsed_model.Recipe(length=64, n_keys=2, **tiny)
    longer = sparsed_model.Recipe(length=80, n_keys=2, **{**tiny, "steps": 1}, init=base)
    starts = []
    real = sparsed_model.LanguageModel

    def recording(*args: object, pretrained_path: str | None = None, **kwargs: object) -> object:
        starts.append(pretrained_path)
        return real(*args, pretrained_path=pretrained_path, **kwargs)

    monkeypatch.setattr(sparsed_model, "LanguageModel", recording)
    model, _ = sparsed_model.pretrained(longer)
    base_folder = sparsed_model.model_folder(base)
    assert starts == [None, str(base_folder)]
    assert base_folder != sparsed_model.model_folder(longer) and model.config.hidden_size == 16
    assert sparsed_model.cache_key(longer)["init"] == sparsed_model.cache_key(base)
    assert "init" not in sparsed_model.cache_key(base)  # recipes from scratch keep their pre-init keys


class _Killed(Exception):
    """Stands for the process being killed."""


def test_a_killed_training_continues_from_its_checkpoint_to_the_same_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tiny = {"hidden_size": 16, "num_layers": 1, "num_heads": 2, "n_train": 8, "batch_size": 4, "steps": 6}
    recipe = sparsed_model.Recipe(length=64, n_keys=2, **tiny)  # 2 steps an epoch: saved at steps 2 and 4
    monkeypatch.setenv("LITLAB_CACHE", str(tmp_path / "whole"))
    whole = load_file(sparsed_model.model_folder(recipe) / "model.safetensors")
    monkeypatch.setenv("LITLAB_CACHE", str(tmp_path / "killed"))
    real_step, calls = sparsed_model.LanguageModel.training_step, []

    def killed_at_step_5(self: object, *args: object) -> object:
        calls.append(len(calls) + 1)
        if len(calls) == 5:
            raise _Killed
        return real_step(self, *args)

    monkeypatch.setattr(sparsed_model.LanguageModel, "training_step", killed_at_step_5)
    with pytest.raises(_Killed):
        sparsed_model.model_folder(recipe)
    assert len(list((tmp_path / "killed").rglob("training.ckpt"))) == 1
    calls.clear()
    continued = load_file(sparsed_model.model_folder(recipe) / "model.safetensors")
    assert calls == [1, 2]  # steps 5 and 6 only
    assert continued.keys() == whole.keys() and all(torch.equal(continued[k], whole[k]) for k in whole)
    assert not list((tmp_path / "killed").rglob("training.ckpt"))
