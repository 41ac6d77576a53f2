"""Read a safetensors checkpoint layer by layer under one set of weight names, whatever the architecture
(Llama, Qwen2/3, Mistral, GPT-2): what weight-space methods (fingerprinting, merging, pruning) need without
instantiating the model or holding all of it in memory.

Canonical names, every matrix in ``nn.Linear`` convention ``(out, in)`` (GPT-2's ``Conv1D`` weights are
transposed and its packed ``c_attn`` is split into q, k, v):

- model: ``embed`` (V, d), ``position_embed`` (GPT-2), ``final_norm``, ``final_norm_bias``, ``lm_head``
  (absent when tied to ``embed``);
- per layer: ``q`` (H·h, d), ``k`` and ``v`` (H_kv·h, d), ``o`` (d, H·h), their ``*_bias``; ``attn_norm``,
  ``mlp_norm`` and their ``*_bias``; ``gate``, ``up`` (f, d), ``down`` (d, f), ``up_bias``, ``down_bias``;
  ``q_norm``, ``k_norm`` (Qwen3). A weight the checkpoint does not have is left out.
"""

from __future__ import annotations

import json
import os
from collections.abc import Collection, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import torch
from safetensors import safe_open

from litlab.core.errors import LitlabError


@dataclass(frozen=True)
class Layout:
    """Where one architecture family stores each canonical weight.

    ``model`` and ``layer`` map canonical names to tensor names; ``{prefix}`` stands for the base-model
    prefix (``model.`` or none, ``transformer.`` or none) and ``{i}`` for the layer index. ``transposed``
    canonical names (``qkv`` for the fused one) are stored ``(in, out)``; ``packed_qkv`` names a fused
    q/k/v weight (and ``packed_qkv_bias`` its bias) cut into three equal parts.
    """

    prefixes: tuple[str, ...]
    model: dict[str, str]
    layer: dict[str, str]
    transposed: frozenset[str] = field(default_factory=frozenset)
    packed_qkv: str | None = None
    packed_qkv_bias: str | None = None


_LLAMA_LAYER = {
    **{f"{p}": f"{{prefix}}layers.{{i}}.self_attn.{p}_proj.weight" for p in "qkvo"},
    **{f"{p}_bias": f"{{prefix}}layers.{{i}}.self_attn.{p}_proj.bias" for p in "qkvo"},
    "q_norm": "{prefix}layers.{i}.self_attn.q_norm.weight",
    "k_norm": "{prefix}layers.{i}.self_attn.k_norm.weight",
    "attn_norm": "{prefix}layers.{i}.input_layernorm.weight",
    "mlp_norm": "{prefix}layers.{i}.post_attention_layernorm.weight",
    **{p: f"{{prefix}}layers.{{i}}.mlp.{p}_proj.weight" for p in ("gate", "up", "down")},
}
LLAMA = Layout(
    prefixes=("model.", ""),
    model={
        "embed": "{prefix}embed_tokens.weight",
        "final_norm": "{prefix}norm.weight",
        "lm_head": "lm_head.weight",
    },
    layer=_LLAMA_LAYER,
)
GPT2 = Layout(
    prefixes=("transformer.", ""),
    model={
        "embed": "{prefix}wte.weight",
        "position_embed": "{prefix}wpe.weight",
        "final_norm": "{prefix}ln_f.weight",
        "final_norm_bias": "{prefix}ln_f.bias",
        "lm_head": "lm_head.weight",
    },
    layer={
        "o": "{prefix}h.{i}.attn.c_proj.weight",
        "o_bias": "{prefix}h.{i}.attn.c_proj.bias",
        "attn_norm": "{prefix}h.{i}.ln_1.weight",
        "attn_norm_bias": "{prefix}h.{i}.ln_1.bias",
        "mlp_norm": "{prefix}h.{i}.ln_2.weight",
        "mlp_norm_bias": "{prefix}h.{i}.ln_2.bias",
        "up": "{prefix}h.{i}.mlp.c_fc.weight",
        "up_bias": "{prefix}h.{i}.mlp.c_fc.bias",
        "down": "{prefix}h.{i}.mlp.c_proj.weight",
        "down_bias": "{prefix}h.{i}.mlp.c_proj.bias",
    },
    transposed=frozenset({"o", "up", "down", "qkv"}),
    packed_qkv="{prefix}h.{i}.attn.c_attn.weight",
    packed_qkv_bias="{prefix}h.{i}.attn.c_attn.bias",
)
# config.json model_type → layout. Qwen2 adds q/k/v biases, Qwen3 q/k norms; both come out when present.
LAYOUTS = {"llama": LLAMA, "mistral": LLAMA, "qwen2": LLAMA, "qwen3": LLAMA, "gpt2": GPT2}
_QKV = ("q", "k", "v")
_GPT2_NAMES = {"hidden_size": "n_embd", "num_hidden_layers": "n_layer", "num_attention_heads": "n_head"}


def _dtype(value: torch.dtype | str | None) -> torch.dtype | None:
    if value is None or isinstance(value, torch.dtype):
        return value
    dtype = getattr(torch, str(value), None)
    if not isinstance(dtype, torch.dtype):
        raise LitlabError(f"dtype={value!r} is not a torch dtype (e.g. float32, bfloat16)")
    return dtype


class CheckpointReader:
    """Layer-by-layer access to a local checkpoint folder (``model.safetensors`` or shards with
    ``model.safetensors.index.json``) under canonical names (see the module docstring).

    Args:
        path: the folder (``save_pretrained`` format, with ``config.json``).
        dtype: convert every tensor to this dtype (None keeps the stored one).
        device: where tensors are loaded (read straight there by safetensors).
        layout: a custom ``Layout``; by default the one of ``config.json``'s ``model_type``.

    Only the tensors asked for are read: ``layers(keys=("q", "k"))`` streams one layer's query and key
    weights at a time.
    """

    def __init__(
        self,
        path: str | os.PathLike,
        dtype: torch.dtype | str | None = None,
        device: torch.device | str = "cpu",
        layout: Layout | None = None,
    ) -> None:
        self.path = Path(path).expanduser()
        config_path = self.path / "config.json"
        if not config_path.is_file():
            raise LitlabError(f"{self.path} has no config.json; give a folder written by save_pretrained")
        self.config = json.loads(config_path.read_text())
        model_type = self.config.get("model_type")
        if layout is None and model_type not in LAYOUTS:
            raise LitlabError(
                f"no weight layout for model_type={model_type!r} (known: {', '.join(sorted(LAYOUTS))}); "
                "pass layout=litlab.lm.checkpoints.Layout(...)"
            )
        self.layout = layout or LAYOUTS[model_type]
        self.dtype, self.device = _dtype(dtype), str(device)
        self.files = self._weight_map()
        self.prefix = next(
            (p for p in self.layout.prefixes if self.layout.model["embed"].format(prefix=p) in self.files),
            None,
        )
        if self.prefix is None:
            raise LitlabError(
                f"{self.path}: no embedding under {self.layout.model['embed']!r} with any prefix"
            )

    def _weight_map(self) -> dict[str, Path]:
        index = self.path / "model.safetensors.index.json"
        if index.is_file():
            weight_map = json.loads(index.read_text())["weight_map"]
            return {name: self.path / file for name, file in weight_map.items()}
        single = self.path / "model.safetensors"
        if not single.is_file():
            raise LitlabError(f"{self.path} has no model.safetensors or model.safetensors.index.json")
        with safe_open(single, framework="pt") as handle:
            return dict.fromkeys(handle.keys(), single)

    def _get(self, key: str) -> int:
        """A config value under its Llama name or GPT-2's alias."""
        return int(self.config[key] if key in self.config else self.config[_GPT2_NAMES[key]])

    @property
    def hidden_size(self) -> int:
        return self._get("hidden_size")

    @property
    def num_layers(self) -> int:
        return self._get("num_hidden_layers")

    @property
    def num_heads(self) -> int:
        return self._get("num_attention_heads")

    @property
    def num_kv_heads(self) -> int:
        return int(self.config.get("num_key_value_heads") or self.num_heads)

    @property
    def head_dim(self) -> int:
        return int(self.config.get("head_dim") or self.hidden_size // self.num_heads)

    def names(self) -> list[str]:
        """Every tensor name stored in the checkpoint."""
        return list(self.files)

    def read(self, names: Collection[str]) -> dict[str, torch.Tensor]:
        """The stored tensors ``names`` (raw names), each file opened once, cast to ``dtype``."""
        by_file: dict[Path, list[str]] = {}
        for name in names:
            by_file.setdefault(self.files[name], []).append(name)
        tensors = {}
        for file, file_names in by_file.items():
            with safe_open(file, framework="pt", device=self.device) as handle:
                for name in file_names:
                    tensor = handle.get_tensor(name)
                    tensors[name] = tensor if self.dtype is None else tensor.to(self.dtype)
        return tensors

    def _orient(self, key: str, tensor: torch.Tensor) -> torch.Tensor:
        return tensor.T.contiguous() if key in self.layout.transposed else tensor

    def _canonical(
        self,
        mapping: dict[str, str],
        keys: Collection[str] | None,
        layer: int | None = None,
        optional: Collection[str] = (),
    ) -> dict[str, torch.Tensor]:
        """The tensors of ``mapping`` (of ``layer``, with its fused q/k/v split) under canonical names.
        A requested key the checkpoint lacks is an error unless it is ``optional``."""
        where = {} if layer is None else {"i": layer}

        def wanted(key: str) -> bool:
            return keys is None or key in keys

        names = {k: v.format(prefix=self.prefix, **where) for k, v in mapping.items() if wanted(k)}
        names = {k: v for k, v in names.items() if v in self.files}
        packed = {}  # "" or "_bias" → the stored name of a fused q/k/v tensor
        for suffix, template in (("", self.layout.packed_qkv), ("_bias", self.layout.packed_qkv_bias)):
            if layer is not None and template and any(wanted(key + suffix) for key in _QKV):
                name = template.format(prefix=self.prefix, **where)
                if name in self.files:
                    packed[suffix] = name
        raw = self.read([*names.values(), *packed.values()])
        out = {key: self._orient(key, raw[name]) for key, name in names.items()}
        for suffix, name in packed.items():
            for key, part in zip(_QKV, self._orient("qkv" + suffix, raw[name]).chunk(3, dim=0)):
                if wanted(key + suffix):
                    out[key + suffix] = part.contiguous()
        missing = sorted(set(keys or ()) - set(out) - set(optional))
        if missing:
            where_text = "" if layer is None else f" in layer {layer}"
            raise LitlabError(f"{self.path} has no weight for {', '.join(missing)}{where_text}")
        return out

    def model_weights(
        self, keys: Collection[str] | None = None, optional: Collection[str] = ()
    ) -> dict[str, torch.Tensor]:
        """The weights outside the layers (``embed``, ``final_norm``, ``lm_head`` ...), or only ``keys``
        (each required unless in ``optional``; without ``keys``, whatever is stored)."""
        return self._canonical(self.layout.model, keys, optional=optional)

    def layer(
        self, index: int, keys: Collection[str] | None = None, optional: Collection[str] = ()
    ) -> dict[str, torch.Tensor]:
        """Layer ``index``'s weights under canonical names (only ``keys`` if given, each required unless
        in ``optional``, e.g. an MoE's absent dense FFN)."""
        if not 0 <= index < self.num_layers:
            raise LitlabError(f"layer {index} is outside 0..{self.num_layers - 1}")
        return self._canonical(self.layout.layer, keys, index, optional)

    def layers(self, keys: Collection[str] | None = None) -> Iterator[tuple[int, dict[str, torch.Tensor]]]:
        """``(index, weights)`` for every layer in order, each read only when the iteration reaches it."""
        for index in range(self.num_layers):
            yield index, self.layer(index, keys)
