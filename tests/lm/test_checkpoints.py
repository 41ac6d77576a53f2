"""The layer-by-layer weight reader on Llama, Qwen2, Qwen3, Mistral and GPT-2 checkpoints built locally
(sharded safetensors): canonical weights reproduce each model's own projections, only the asked layer is
read, and dtype/device are honoured."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from safetensors import safe_open
from transformers import (
    GPT2Config,
    GPT2LMHeadModel,
    LlamaConfig,
    LlamaForCausalLM,
    MistralConfig,
    MistralForCausalLM,
    PreTrainedModel,
    Qwen2Config,
    Qwen2ForCausalLM,
    Qwen3Config,
    Qwen3ForCausalLM,
)

import litlab.lm.checkpoints as checkpoints
from litlab.core.errors import LitlabError
from litlab.lm.checkpoints import CheckpointReader

SIZES = {"vocab_size": 64, "hidden_size": 32, "intermediate_size": 48, "num_hidden_layers": 3}
HEADS = {"num_attention_heads": 4, "num_key_value_heads": 2}
MODELS = {
    "llama": lambda: LlamaForCausalLM(LlamaConfig(**SIZES, **HEADS)),
    "qwen2": lambda: Qwen2ForCausalLM(Qwen2Config(**SIZES, **HEADS, tie_word_embeddings=False)),
    "qwen3": lambda: Qwen3ForCausalLM(Qwen3Config(**SIZES, **HEADS, head_dim=8)),
    "mistral": lambda: MistralForCausalLM(MistralConfig(**SIZES, **HEADS)),
    "gpt2": lambda: GPT2LMHeadModel(
        GPT2Config(vocab_size=64, n_embd=32, n_layer=3, n_head=4, n_positions=16)
    ),
}


@pytest.fixture(scope="module", params=list(MODELS))
def saved(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> tuple[PreTrainedModel, Path]:
    torch.manual_seed(0)
    model = MODELS[request.param]().eval()
    folder = tmp_path_factory.mktemp(request.param)
    model.save_pretrained(folder, max_shard_size="20KB")  # several shards and an index
    return model, folder


def _projections(model: PreTrainedModel, layer: int, x: torch.Tensor) -> dict[str, torch.Tensor]:
    """The model's own q/k/v and MLP input projections (GPT-2: and its output one) of ``x`` in ``layer``."""
    if isinstance(model, GPT2LMHeadModel):
        block = model.transformer.h[layer]
        q, k, v = block.attn.c_attn(x).split(32, dim=-1)
        return {"q": q, "k": k, "v": v, "o": block.attn.c_proj(x), "up": block.mlp.c_fc(x)}
    block = model.model.layers[layer]
    attention, mlp = block.self_attn, block.mlp
    modules = {"q": attention.q_proj, "k": attention.k_proj, "v": attention.v_proj, "up": mlp.up_proj}
    return {key: module(x) for key, module in {**modules, "gate": mlp.gate_proj}.items()}


def test_canonical_weights_reproduce_the_model_s_projections(saved: tuple) -> None:
    model, folder = saved
    reader = CheckpointReader(folder)
    assert reader.num_layers == 3 and reader.hidden_size == 32 and reader.num_heads == 4
    x = torch.randn(5, 32, generator=torch.Generator().manual_seed(0))
    o_input = torch.randn(5, 32, generator=torch.Generator().manual_seed(1))
    for index, weights in reader.layers():
        own = _projections(model, index, x)
        for key in own.keys() - {"o"}:
            bias = weights.get(f"{key}_bias", 0)
            assert torch.allclose(x @ weights[key].T + bias, own[key], atol=1e-5), (index, key)
        if isinstance(model, GPT2LMHeadModel):
            assert torch.allclose(x @ weights["o"].T + weights["o_bias"], own["o"], atol=1e-5)
        else:
            o_proj = model.model.layers[index].self_attn.o_proj
            assert torch.allclose(o_input @ weights["o"].T, o_proj(o_input), atol=1e-5)
            assert weights["k"].shape == (2 * reader.head_dim, 32)  # grouped-query keys
            assert ("q_norm" in weights) == isinstance(model, Qwen3ForCausalLM)
            assert ("q_bias" in weights) == isinstance(model, Qwen2ForCausalLM)
    shared = reader.model_weights()
    assert torch.equal(shared["embed"], model.get_input_embeddings().weight.detach())
    assert ("lm_head" in shared) == (not model.config.tie_word_embeddings)
    base = model.transformer.ln_f if isinstance(model, GPT2LMHeadModel) else model.model.norm
    assert torch.equal(shared["final_norm"], base.weight.detach())


def test_layers_are_streamed_one_at_a_time(saved: tuple, monkeypatch: pytest.MonkeyPatch) -> None:
    _, folder = saved
    read: list[str] = []

    class Recording:
        def __init__(self, *args: object, **kwargs: object) -> None:
            self.inner = safe_open(*args, **kwargs)

        def __enter__(self) -> Recording:
            self.handle = self.inner.__enter__()
            return self

        def __exit__(self, *exc: object) -> None:
            self.inner.__exit__(*exc)

        def keys(self) -> list[str]:
            return self.handle.keys()

        def get_tensor(self, name: str) -> torch.Tensor:
            read.append(name)
            return self.handle.get_tensor(name)

    monkeypatch.setattr(checkpoints, "safe_open", Recording)
    reader = CheckpointReader(folder)
    layers = reader.layers(keys=("q", "k"))
    assert read == []  # nothing is read before the iteration asks
    for index, weights in layers:
        assert set(weights) == {"q", "k"}
        assert read and all((f".{index}." in name) for name in read), read  # this layer's tensors only
        read.clear()


def test_dtype_and_device_control_and_clear_errors(saved: tuple, tmp_path: Path) -> None:
    _, folder = saved
    half = CheckpointReader(folder, dtype="bfloat16", device="cpu").layer(1, keys=("q",))
    full = CheckpointReader(folder).layer(1, keys=("q",))
    assert half["q"].dtype == torch.bfloat16 and half["q"].device.type == "cpu"
    assert torch.allclose(half["q"].float(), full["q"], atol=1e-2)
    with pytest.raises(LitlabError, match="outside"):
        CheckpointReader(folder).layer(3)
    with pytest.raises(LitlabError, match="no config.json"):
        CheckpointReader(tmp_path)
    with pytest.raises(LitlabError, match="not a torch dtype"):
        CheckpointReader(folder, dtype="float33")


def test_a_requested_weight_the_checkpoint_lacks_is_an_error_unless_optional(saved: tuple) -> None:
    _, folder = saved
    reader = CheckpointReader(folder)
    with pytest.raises(LitlabError, match="no weight for expert_up in layer 1"):
        reader.layer(1, keys=("q", "expert_up"))
    assert set(reader.layer(1, keys=("q", "expert_up"), optional=("expert_up",))) == {"q"}
    with pytest.raises(LitlabError, match="no weight for router"):
        reader.model_weights(keys=("embed", "router"))
