"""What AWM reads from a model: the token embedding, the vocabulary strings and each layer's W_q and W_k.

``Checkpoint`` streams them from a local Hugging Face / safetensors folder through ``litlab.lm``'s
``CheckpointReader`` (Llama, Mistral, Qwen2/3 and GPT-2 key names by its mapping table, or a custom
``Layout``), one layer at a time, so two models larger than half the memory can be compared. ``InMemory``
holds the same tensors for tests and generated weights.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import torch

from litlab.core.errors import LitlabError


class WeightSource(Protocol):
    """A model as AWM sees it; every matrix in ``nn.Linear`` layout ``(out, in)``."""

    name: str
    hidden_size: int
    num_layers: int

    def vocab(self) -> Mapping[str, int] | None:
        """Token string → embedding row, or None when the model ships no readable vocabulary."""

    def embed(self) -> torch.Tensor:
        """``(V, d)`` token embedding."""

    def qk(self, layer: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Layer ``layer``'s ``W_q: (H·h, d)`` and ``W_k: (H_kv·h, d)``."""


@dataclass
class InMemory:
    """A ``WeightSource`` from tensors: ``layers`` holds one ``(W_q, W_k)`` per layer."""

    embedding: torch.Tensor
    layers: Sequence[tuple[torch.Tensor, torch.Tensor]]
    vocabulary: Mapping[str, int] | None = None
    name: str = "in-memory"

    @property
    def hidden_size(self) -> int:
        return int(self.embedding.shape[1])

    @property
    def num_layers(self) -> int:
        return len(self.layers)

    def vocab(self) -> Mapping[str, int] | None:
        return self.vocabulary

    def embed(self) -> torch.Tensor:
        return self.embedding

    def qk(self, layer: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.layers[layer]


def read_vocab(folder: str | os.PathLike) -> dict[str, int] | None:
    """Token string → id from ``tokenizer.json`` (BPE/WordPiece dict or Unigram list, plus added tokens) or
    GPT-2's ``vocab.json``; None when the folder has neither."""
    folder = Path(folder)
    if (folder / "tokenizer.json").is_file():
        data = json.loads((folder / "tokenizer.json").read_text(encoding="utf-8"))
        model_vocab = data.get("model", {}).get("vocab", {})
        if isinstance(model_vocab, list):  # Unigram: [[piece, score], ...], id = position
            vocab = {piece: i for i, (piece, _) in enumerate(model_vocab)}
        else:
            vocab = {str(k): int(v) for k, v in model_vocab.items()}
        vocab.update({t["content"]: int(t["id"]) for t in data.get("added_tokens", [])})
        return vocab
    if (folder / "vocab.json").is_file():
        return {str(k): int(v) for k, v in json.loads((folder / "vocab.json").read_text()).items()}
    return None


# model types the shared mapping table lacks whose attention and embedding keys are Llama's (Mixtral's MoE
# FFN keys then read as absent, which AWM never needs).
LLAMA_ATTENTION = ("mixtral",)


def open_reader(path: str | os.PathLike, dtype: str = "float32", layout: object | None = None) -> object:
    """A ``litlab.lm.checkpoints.CheckpointReader`` of ``path``; Mixtral folders use the Llama layout."""
    from litlab.lm.checkpoints import LLAMA, CheckpointReader

    if layout is None:
        config = Path(path).expanduser() / "config.json"
        if config.is_file() and json.loads(config.read_text()).get("model_type") in LLAMA_ATTENTION:
            layout = LLAMA
    return CheckpointReader(path, dtype=dtype, layout=layout)


class Checkpoint:
    """A ``WeightSource`` streaming a local checkpoint folder; refuses, in one line naming the missing keys,
    a layout without an embedding or a W_q/W_k in every layer.

    Args:
        path: a ``save_pretrained`` folder (``config.json`` + ``model.safetensors`` or shards).
        layout: a ``litlab.lm.checkpoints.Layout`` for a family the mapping table does not know.
        dtype: the dtype tensors are converted to on reading.
    """

    def __init__(self, path: str | os.PathLike, layout: object | None = None, dtype: str = "float32") -> None:
        self.path = Path(path).expanduser()
        self.name = self.path.name
        self.reader = open_reader(self.path, dtype=dtype, layout=layout)
        self.hidden_size = self.reader.hidden_size
        self.num_layers = self.reader.num_layers
        self._check_keys()

    def _check_keys(self) -> None:
        layout, prefix, files = self.reader.layout, self.reader.prefix, self.reader.files
        missing = []
        for i in range(self.num_layers):
            packed = layout.packed_qkv and layout.packed_qkv.format(prefix=prefix, i=i) in files
            if packed:
                continue
            for key in ("q", "k"):
                template = layout.layer.get(key)
                name = template.format(prefix=prefix, i=i) if template else f"<{key} of layer {i}>"
                if name not in files:
                    missing.append(name)
        if missing:
            more = f" (+{len(missing) - 3} more)" if len(missing) > 3 else ""
            raise LitlabError(
                f"{self.path}: no weight {', '.join(missing[:3])}{more} for model_type="
                f"{self.reader.config.get('model_type')!r}; pass layout=litlab.lm.Layout(...) naming W_q/W_k"
            )

    def vocab(self) -> dict[str, int] | None:
        return read_vocab(self.path)

    def embed(self) -> torch.Tensor:
        return self.reader.model_weights(keys=("embed",))["embed"]

    def qk(self, layer: int) -> tuple[torch.Tensor, torch.Tensor]:
        weights = self.reader.layer(layer, keys=("q", "k"))
        return weights["q"], weights["k"]


def as_source(model: WeightSource | str | os.PathLike) -> WeightSource:
    """A path becomes a ``Checkpoint``; a source passes through."""
    return Checkpoint(model) if isinstance(model, str | os.PathLike) else model


def from_model(
    model: torch.nn.Module, vocabulary: Mapping[str, int] | None = None, name: str = ""
) -> InMemory:
    """The AWM view of an in-memory Llama-layout model (``model.model.layers[i].self_attn``)."""
    layers = [
        (block.self_attn.q_proj.weight.detach(), block.self_attn.k_proj.weight.detach())
        for block in model.model.layers
    ]
    embed = model.get_input_embeddings().weight.detach()
    return InMemory(embed, layers, vocabulary, name or type(model).__name__)
