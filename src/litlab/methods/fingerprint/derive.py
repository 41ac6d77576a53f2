"""Model derivations of the testbed that need no training: AWM's target manipulations (function-preserving
reparametrisations), the structural edits that a healing fine-tune then follows (width/depth/head pruning,
vocabulary extension), and the statistics-matched Gaussian negative.

All act on a Llama-layout ``LlamaForCausalLM`` (``litlab.lm.build_lm``) and return a new model; matrices are
``nn.Linear`` ``(out, in)``. ``head_dim`` is written into the config explicitly, so pruned widths keep it.
"""

from __future__ import annotations

import copy

import torch
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedModel

_IN_SIDE = ("embed_tokens", "lm_head", "q_proj", "k_proj", "v_proj", "gate_proj", "up_proj")
_OUT_SIDE = ("o_proj", "down_proj")


def _kind(name: str) -> str:
    """Which axis of parameter ``name`` is the residual stream: 'in' (columns), 'out' (rows) or 'vec'."""
    if any(part in name for part in _IN_SIDE):
        return "in"
    if any(part in name for part in _OUT_SIDE):
        return "out"
    return "vec"  # RMSNorm gains


def _rebuild(model: LlamaForCausalLM, state: dict[str, torch.Tensor], **changes: int) -> LlamaForCausalLM:
    """A fresh model of ``model``'s config with ``changes`` holding ``state``."""
    config = LlamaConfig.from_dict({**model.config.to_dict(), "head_dim": _head_dim(model), **changes})
    new = LlamaForCausalLM(config)
    new.load_state_dict(state, strict=False)
    new.tie_weights()
    return new


def _head_dim(model: LlamaForCausalLM) -> int:
    config = model.config
    return int(getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads)


def _state(model: LlamaForCausalLM) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def permute_hidden(
    model: LlamaForCausalLM, generator: torch.Generator
) -> tuple[LlamaForCausalLM, torch.Tensor, torch.Tensor]:
    """The same function with residual dimension j moved to ``perm[j]`` and sign-flipped by ``signs[j]``
    (norm gains permuted, so RMSNorm commutes): returns the model, ``perm`` and ``signs`` ``(d,)``."""
    d = model.config.hidden_size
    perm = torch.randperm(d, generator=generator)
    signs = torch.where(torch.rand(d, generator=generator) < 0.5, -1.0, 1.0)
    state = {}
    for name, w in _state(model).items():
        kind = _kind(name)
        if kind == "in":
            w = w[:, perm] * signs
        elif kind == "out":
            w = w[perm] * signs[:, None]
        elif w.ndim == 1 and w.shape[0] == d:
            w = w[perm]
        state[name] = w
    return _rebuild(model, state), perm, signs


def _heads(model: LlamaForCausalLM) -> tuple[int, int, int]:
    """``(kv heads, query heads per kv head, head_dim)``."""
    config = model.config
    kv = config.num_key_value_heads
    return kv, config.num_attention_heads // kv, _head_dim(model)


def scale_qk(model: LlamaForCausalLM, factor: float) -> LlamaForCausalLM:
    """W_q·c and W_k/c: the attention logits, hence the function, are unchanged."""
    state = _state(model)
    for name in state:
        if "q_proj.weight" in name:
            state[name] = state[name] * factor
        elif "k_proj.weight" in name:
            state[name] = state[name] / factor
    return _rebuild(model, state)


def rotate_heads(model: LlamaForCausalLM, generator: torch.Generator) -> LlamaForCausalLM:
    """A random rotation in each RoPE plane (dims i, i + h/2) of each head, the same for W_q and W_k of a
    head group: it commutes with RoPE, so q·k and the function are unchanged."""
    kv, group, h = _heads(model)
    state = _state(model)
    for i in range(model.config.num_hidden_layers):
        angle = torch.rand(kv, h // 2, generator=generator) * 2 * torch.pi
        cos, sin = angle.cos()[:, :, None], angle.sin()[:, :, None]
        for key, n_heads in (("q_proj", kv * group), ("k_proj", kv)):
            name = f"model.layers.{i}.self_attn.{key}.weight"
            w = state[name].view(kv, n_heads // kv, 2, h // 2, -1)
            c, s = cos[:, None, :, :], sin[:, None, :, :]
            low, high = w[:, :, 0], w[:, :, 1]
            state[name] = torch.stack([c * low - s * high, s * low + c * high], 2).reshape(n_heads * h, -1)
    return _rebuild(model, state)


def _select_heads(model: LlamaForCausalLM, keep: torch.Tensor) -> dict[str, torch.Tensor]:
    """The state with only kv heads ``keep`` (in that order) and their query groups."""
    kv, group, h = _heads(model)
    state = _state(model)
    for i in range(model.config.num_hidden_layers):
        prefix = f"model.layers.{i}.self_attn."
        q = state[prefix + "q_proj.weight"]
        state[prefix + "q_proj.weight"] = q.view(kv, group * h, -1)[keep].reshape(-1, q.shape[1])
        for key in ("k_proj", "v_proj"):
            w = state[prefix + key + ".weight"]
            state[prefix + key + ".weight"] = w.view(kv, h, -1)[keep].reshape(-1, w.shape[1])
        o = state[prefix + "o_proj.weight"]
        state[prefix + "o_proj.weight"] = o.view(o.shape[0], kv, group * h)[:, keep].reshape(o.shape[0], -1)
    return state


def permute_heads(model: LlamaForCausalLM, generator: torch.Generator) -> LlamaForCausalLM:
    """The kv heads (with their query groups) in a random order in every layer: the same function."""
    kv, _, _ = _heads(model)
    return _rebuild(model, _select_heads(model, torch.randperm(kv, generator=generator)))


def prune_heads(model: LlamaForCausalLM, keep: torch.Tensor) -> LlamaForCausalLM:
    """Only kv heads ``keep`` (and their query groups) in every layer."""
    _, group, _ = _heads(model)
    return _rebuild(
        model,
        _select_heads(model, keep),
        num_key_value_heads=len(keep),
        num_attention_heads=len(keep) * group,
    )


def width_keep(model: LlamaForCausalLM, fraction: float) -> torch.Tensor:
    """The residual dimensions a magnitude criterion keeps: the ``fraction`` with the largest embedding
    column norms, in their original order."""
    norms = model.get_input_embeddings().weight.detach().norm(dim=0)
    n_keep = round(fraction * len(norms))
    return norms.topk(n_keep).indices.sort().values


def prune_width(model: LlamaForCausalLM, keep: torch.Tensor) -> LlamaForCausalLM:
    """Only residual dimensions ``keep`` (sorted): every in-side column, out-side row and norm gain."""
    d = model.config.hidden_size
    state = {}
    for name, w in _state(model).items():
        kind = _kind(name)
        if kind == "in":
            w = w[:, keep]
        elif kind == "out" or w.ndim == 1 and w.shape[0] == d:
            w = w[keep]
        state[name] = w
    return _rebuild(model, state, hidden_size=len(keep))


def prune_depth(model: LlamaForCausalLM, drop: list[int]) -> LlamaForCausalLM:
    """The model without layers ``drop`` (the rest renumbered in order)."""
    n = model.config.num_hidden_layers
    kept = [i for i in range(n) if i not in drop]
    renumber = {old: new for new, old in enumerate(kept)}
    state = {}
    for name, w in _state(model).items():
        if name.startswith("model.layers."):
            index = int(name.split(".")[2])
            if index not in renumber:
                continue
            name = name.replace(f"model.layers.{index}.", f"model.layers.{renumber[index]}.", 1)
        state[name] = w
    return _rebuild(model, state, num_hidden_layers=len(kept))


def extend_vocab(model: LlamaForCausalLM, n_new: int) -> LlamaForCausalLM:
    """``n_new`` more embedding rows (initialised at the mean row), as for tokens added to the tokenizer."""
    new = copy.deepcopy(model)
    new.resize_token_embeddings(model.config.vocab_size + n_new, mean_resizing=True)
    return new


def gaussian_like(model: LlamaForCausalLM, generator: torch.Generator) -> LlamaForCausalLM:
    """Every matrix replaced by Gaussian noise with its own mean and std (the official code's synthetic
    negative); norm gains kept."""
    state = {}
    for name, w in _state(model).items():
        if w.ndim >= 2:
            w = w.mean() + w.std() * torch.randn(w.shape, generator=generator, dtype=w.dtype)
        state[name] = w
    return _rebuild(model, state)


def upcycle_moe(
    model: LlamaForCausalLM, generator: torch.Generator, experts: int = 4, top_k: int = 2
) -> PreTrainedModel:
    """Sparse upcycling (Komatsuzaki et al. 2023): a Mixtral model whose every expert is a copy of the dense
    SwiGLU FFN and whose router is new (N(0, 0.02)); attention, norms and embeddings are kept. Top-k weights
    are renormalised, so at initialisation the MoE computes exactly the dense model's function."""
    from transformers import MixtralConfig, MixtralForCausalLM

    fields = {k: v for k, v in model.config.to_dict().items() if k not in ("model_type", "architectures")}
    config = MixtralConfig(
        **{**fields, "head_dim": _head_dim(model)}, num_local_experts=experts, num_experts_per_tok=top_k
    )
    config.router_jitter_noise = 0.0
    moe = MixtralForCausalLM(config)
    state = {}
    for name, w in _state(model).items():
        if ".mlp." not in name:
            state[name] = w
    d = model.config.hidden_size
    for i, block in enumerate(model.model.layers):
        prefix = f"model.layers.{i}.mlp."
        mlp = block.mlp
        gate_up = torch.cat([mlp.gate_proj.weight, mlp.up_proj.weight]).detach()
        state[prefix + "experts.gate_up_proj"] = gate_up.expand(experts, -1, -1).clone()
        state[prefix + "experts.down_proj"] = mlp.down_proj.weight.detach().expand(experts, -1, -1).clone()
        state[prefix + "gate.weight"] = 0.02 * torch.randn(experts, d, generator=generator)
    missing, unexpected = moe.load_state_dict(state, strict=False)
    if unexpected or [m for m in missing if m != "lm_head.weight"]:
        raise RuntimeError(f"upcycling left weights unset: missing {missing}, unexpected {unexpected}")
    moe.tie_weights()
    return moe
