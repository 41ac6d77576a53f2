"""Checkpoint loading: scores from saved folders equal in-memory scores; bad layouts fail in one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from litlab.core.errors import LitlabError
from litlab.lm import build_lm, llama_config
from litlab.methods.fingerprint import derive
from litlab.methods.fingerprint.score import awm_score
from litlab.methods.fingerprint.weights import Checkpoint, from_model, read_vocab

VOCAB = {f"t{i}": i for i in range(300)}


def _save(model, folder: Path, vocab: dict[str, int] | None = VOCAB) -> Path:
    model.save_pretrained(folder)
    if vocab is not None:
        (folder / "tokenizer.json").write_text(json.dumps({"model": {"vocab": vocab}, "added_tokens": []}))
    return folder


@pytest.fixture(scope="module")
def models():
    torch.manual_seed(0)
    base = build_lm(llama_config(300, 64, 2, 4, initializer_range=0.05))
    pruned = derive.prune_width(base, derive.width_keep(base, 0.75))
    return base, pruned


def test_checkpoint_scores_equal_in_memory_scores(models, tmp_path: Path) -> None:
    base, pruned = models
    a, b = _save(base, tmp_path / "base"), _save(pruned, tmp_path / "pruned")
    on_disk = awm_score(a, b)
    in_memory = awm_score(from_model(base, VOCAB), from_model(pruned, VOCAB))
    assert on_disk.score == pytest.approx(in_memory.score, abs=1e-6)
    assert torch.equal(on_disk.alignment.index, in_memory.alignment.index)
    assert read_vocab(a) == VOCAB


def test_unigram_and_added_tokens_are_read(tmp_path: Path) -> None:
    data = {"model": {"vocab": [["<unk>", 0.0], ["▁a", -1.0]]}, "added_tokens": [{"id": 2, "content": "<x>"}]}
    (tmp_path / "tokenizer.json").write_text(json.dumps(data))
    assert read_vocab(tmp_path) == {"<unk>": 0, "▁a": 1, "<x>": 2}


def test_missing_query_weight_is_named_in_one_line(models, tmp_path: Path) -> None:
    folder = _save(models[0], tmp_path / "broken")
    tensors = load_file(folder / "model.safetensors")
    del tensors["model.layers.1.self_attn.q_proj.weight"]
    save_file(tensors, folder / "model.safetensors")
    with pytest.raises(LitlabError, match=r"model\.layers\.1\.self_attn\.q_proj\.weight") as error:
        Checkpoint(folder)
    assert "\n" not in str(error.value)


def test_unknown_family_and_missing_vocabulary_are_refused(models, tmp_path: Path) -> None:
    folder = _save(models[0], tmp_path / "odd")
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "model_type": "mamba"}))
    with pytest.raises(LitlabError, match="model_type='mamba'"):
        Checkpoint(folder)
    no_vocab_wide = _save(models[0], tmp_path / "wide", vocab=None)
    no_vocab_narrow = _save(models[1], tmp_path / "narrow", vocab=None)
    with pytest.raises(LitlabError, match="hidden sizes must match"):
        awm_score(no_vocab_wide, no_vocab_narrow)
    assert awm_score(no_vocab_wide, no_vocab_wide).score == pytest.approx(1.0, abs=1e-6)


def test_gpt2_packed_attention_is_split_and_scored(tmp_path: Path) -> None:
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(vocab_size=300, n_embd=32, n_layer=2, n_head=4, n_positions=16))
    folder = _save(model, tmp_path / "gpt2")
    source = Checkpoint(folder)
    q, k = source.qk(1)
    torch.testing.assert_close(q, model.transformer.h[1].attn.c_attn.weight[:, :32].T)
    torch.testing.assert_close(k, model.transformer.h[1].attn.c_attn.weight[:, 32:64].T)
    assert awm_score(folder, folder).score == pytest.approx(1.0, abs=1e-6)


class _Recorder:
    """A source that logs which layers are read, to check the streaming order."""

    def __init__(self, source, name: str, log: list) -> None:
        self.source, self.name, self.log = source, name, log
        self.hidden_size, self.num_layers = source.hidden_size, source.num_layers

    def vocab(self):
        return self.source.vocab()

    def embed(self):
        return self.source.embed()

    def qk(self, layer: int):
        self.log.append((self.name, layer))
        return self.source.qk(layer)


def test_equal_depths_stream_one_layer_of_each_model_at_a_time(models) -> None:
    log: list = []
    base = _Recorder(from_model(models[0], VOCAB), "a", log)
    other = _Recorder(from_model(models[1], VOCAB), "b", log)
    awm_score(base, other)
    assert log == [("a", 0), ("b", 0), ("a", 1), ("b", 1)]
