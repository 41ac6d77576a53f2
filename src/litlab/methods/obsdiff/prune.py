"""OBS-Diff's pruning driver: module selection by name, module packages, K sequential groups.

Target ``nn.Linear``s are chosen by glob patterns on module names. Parallel layers of a block stay in one
package ({q, k, v, add_*_proj}, {to_out.0, to_add_out}, {ff.net.0.proj, ff_context...}, {ff.net.2, ...});
the packages, in model order, are split into K contiguous groups. For each group, forward hooks
accumulate each layer's timestep-weighted Hessian over one full calibration sampling pass, then every
layer of the group is pruned; later groups therefore calibrate on the already pruned model. The sampling
loop is the paper's algorithm, so it is written here rather than run through a trainer.
"""

from __future__ import annotations

import fnmatch
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch
from torch import nn

from litlab.core.errors import ConfigError
from litlab.methods.obsdiff.obs import (
    HessianAccumulator,
    magnitude_mask,
    obs_prune,
    reconstruction_error,
    timestep_weights,
    wanda_mask,
)
from litlab.methods.obsdiff.structured import (
    check_head_removal,
    head_dim,
    l1_keep,
    obs_remove_columns,
    remove_ffn_neurons,
    remove_heads,
)

UNSTRUCTURED = ("obs", "wanda", "magnitude")
STRUCTURED = ("obs_structured", "l1_structured")
METHODS = UNSTRUCTURED + STRUCTURED
DIT_PATTERNS = (
    "transformer_blocks.*.attn1.to_[qkv]",
    "transformer_blocks.*.attn1.to_out.0",
    "transformer_blocks.*.ff.net.0.proj",
    "transformer_blocks.*.ff.net.2",
)
# What structured pruning removes, by the layer whose input columns it scores: FFN neurons (inputs of
# ff.net.2) and attention heads (head_dim-wide slices of the input of attn1.to_out.0).
STRUCTURES = {
    "ffn": ("transformer_blocks.*.ff.net.2",),
    "heads": ("transformer_blocks.*.attn1.to_out.0",),
    "both": ("transformer_blocks.*.attn1.to_out.0", "transformer_blocks.*.ff.net.2"),
}
# The role of a layer inside its block; layers with one role in one block form a package.
ROLES = (
    ("qkv", re.compile(r"(to_[qkv]|add_[qkv]_proj)$")),
    ("out", re.compile(r"(to_out\.0|to_add_out)$")),
    ("ff_in", re.compile(r"ff(_context)?\.net\.0\.proj$")),
    ("ff_out", re.compile(r"ff(_context)?\.net\.2$")),
)
BLOCK = re.compile(r"^(.*?blocks\.\d+)\.")

Calibrate = Callable[[Callable[[int], None]], None]


def select_linears(model: nn.Module, patterns: Sequence[str]) -> dict[str, nn.Linear]:
    """The ``nn.Linear``s whose names match any glob pattern, in model order; a dead pattern is an error."""
    linears = {name: module for name, module in model.named_modules() if isinstance(module, nn.Linear)}
    for pattern in patterns:
        if not any(fnmatch.fnmatchcase(name, pattern) for name in linears):
            example = next(iter(linears), "none")
            raise ConfigError(
                f"module pattern {pattern!r} matches no nn.Linear in {type(model).__name__} "
                f"(names look like {example!r})"
            )
    return {n: m for n, m in linears.items() if any(fnmatch.fnmatchcase(n, p) for p in patterns)}


def packages(names: Sequence[str]) -> list[list[str]]:
    """Layer names grouped into packages (same block, same role), in order of first appearance."""
    keyed: dict[tuple[str, str], list[str]] = {}
    for name in names:
        block = BLOCK.match(name)
        role = next((role for role, rule in ROLES if rule.search(name)), name)
        keyed.setdefault((block.group(1) if block else "", role), []).append(name)
    return list(keyed.values())


def split_groups(items: Sequence[list[str]], k: int) -> list[list[str]]:
    """``items`` (packages) split into min(k, len) contiguous groups of near-equal size, flattened."""
    if k < 1:
        raise ConfigError(f"groups must be >= 1, got {k}")
    k = min(k, len(items))
    bounds = [round(i * len(items) / k) for i in range(k + 1)]
    return [[name for package in items[a:b] for name in package] for a, b in zip(bounds, bounds[1:])]


@dataclass
class PruneReport:
    """What a pruning run did: seconds, calibration passes, per-layer reconstruction error, sparsity, and
    for structured methods the kept groups (neurons or heads) of every scored layer."""

    seconds: float = 0.0
    passes: int = 0
    layer_error: dict[str, float] = field(default_factory=dict)
    sparsity: float = 0.0
    kept: dict[str, list[int]] = field(default_factory=dict)


@dataclass
class PruneSpec:
    """How to prune: method, sparsity (or n:m; for structured methods the fraction of FFN neurons and/or
    heads per layer, ``structure``), K groups, timestep weighting."""

    method: str = "obs"
    sparsity: float = 0.5
    n: int = 0
    m: int = 0
    groups: int = 4
    timestep_weighting: str = "log_decrease"
    w_min: float = 0.8
    w_max: float = 1.2
    blocksize: int = 128
    damp: float = 0.01
    chunk: int = 8
    structure: str = "ffn"

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise ConfigError(f"unknown pruning method {self.method!r}; choose one of {', '.join(METHODS)}")
        if self.method in STRUCTURED and self.n:
            raise ConfigError("N:M sparsity applies to unstructured methods only (obs, wanda, magnitude)")
        if self.structure not in STRUCTURES:
            raise ConfigError(f"unknown structure {self.structure!r}; choose one of {', '.join(STRUCTURES)}")
        if self.method in STRUCTURED and not 0.0 <= self.sparsity < 1.0:
            raise ConfigError(f"structured sparsity must be in [0, 1), got {self.sparsity}")


def _hooked_hessians(
    layers: dict[str, nn.Linear], calibrate: Calibrate, weights: torch.Tensor
) -> dict[str, HessianAccumulator]:
    """One calibration pass with forward hooks; each layer's weighted Hessian of its inputs."""
    step = {"weight": 1.0}
    hessians = {
        name: HessianAccumulator(layer.in_features, layer.weight.device) for name, layer in layers.items()
    }

    def hook_for(name: str) -> Callable:
        def hook(module: nn.Module, inputs: tuple[torch.Tensor, ...], output: torch.Tensor) -> None:
            hessians[name].add(inputs[0], step["weight"])

        return hook

    handles = [layer.register_forward_hook(hook_for(name)) for name, layer in layers.items()]
    try:
        calibrate(lambda index: step.update(weight=float(weights[min(index, len(weights) - 1)])))
    finally:
        for handle in handles:
            handle.remove()
    return hessians


def _prune_layer(layer: nn.Linear, hessian: torch.Tensor | None, spec: PruneSpec) -> torch.Tensor:
    """Prune one layer in place by the unstructured ``spec.method``; returns its new weight."""
    weight = layer.weight.data
    if spec.method == "obs":
        pruned, _ = obs_prune(weight, hessian, spec.sparsity, spec.n, spec.m, spec.blocksize, spec.damp)
    else:
        mask = (
            magnitude_mask(weight, spec.sparsity, spec.n, spec.m)
            if spec.method == "magnitude"
            else wanda_mask(weight, hessian.diagonal(), spec.sparsity, spec.n, spec.m)
        )
        pruned = weight.masked_fill(mask, 0.0)
    layer.weight.data = pruned.to(weight.dtype)
    return pruned


def prune_model(
    model: nn.Module,
    calibrate: Calibrate,
    steps: int,
    spec: PruneSpec,
    patterns: Sequence[str] = DIT_PATTERNS,
) -> PruneReport:
    """Prune ``model`` in place. ``calibrate(on_step)`` runs one full sampling pass over the calibration
    set, calling ``on_step(i)`` before denoising step i of ``steps``.

    Unstructured methods prune the matching layers; structured ones remove ``spec.sparsity`` of the FFN
    neurons (inputs of ``ff.net.2``) and/or attention heads (of ``to_out.0``) of every block, as
    ``spec.structure`` says, and cut them out of the model.
    """
    start = time.perf_counter()
    structured = spec.method in STRUCTURED
    if structured and tuple(patterns) == DIT_PATTERNS:
        patterns = STRUCTURES[spec.structure]
    layers = select_linears(model, patterns)
    weights = timestep_weights(spec.timestep_weighting, steps, spec.w_min, spec.w_max)
    report = PruneReport()
    needs_data = spec.method not in ("magnitude", "l1_structured")
    for group in split_groups(packages(list(layers)), spec.groups if needs_data else 1):
        group_layers = {name: layers[name] for name in group}
        hessians = {}
        if needs_data:
            hessians = {
                n: acc.hessian for n, acc in _hooked_hessians(group_layers, calibrate, weights).items()
            }
            report.passes += 1
        for name, layer in group_layers.items():
            dense = layer.weight.data.clone()
            if structured:
                pruned, keep = _prune_structured(model, name, layer, hessians.get(name), spec)
                report.kept[name] = keep.tolist()
            else:
                pruned = _prune_layer(layer, hessians.get(name), spec)
            if name in hessians and not structured:
                report.layer_error[name] = reconstruction_error(dense, pruned, hessians[name])
    after = select_linears(model, patterns).values()
    if structured:  # the fraction of the scored layers' input columns (neurons, head slices) cut out
        report.sparsity = 1 - sum(layer.in_features for layer in after) / sum(
            l.in_features for l in layers.values()
        )
    else:
        report.sparsity = sum(int((layer.weight == 0).sum()) for layer in after) / sum(
            l.weight.numel() for l in after
        )
    report.seconds = time.perf_counter() - start
    return report


def _prune_structured(
    model: nn.Module, name: str, layer: nn.Linear, hessian: torch.Tensor | None, spec: PruneSpec
) -> tuple[torch.Tensor, torch.Tensor]:
    """Remove ``spec.sparsity`` of the FFN neurons feeding ``name`` (an ``ff.net.2``) or of the heads
    feeding it (a ``to_out.0``), with the group-OBS update or by L1 norm, and cut them out; returns the
    updated full-width weight and the kept neuron or head indices."""
    if name.endswith("ff.net.2"):
        owner = model.get_submodule(name.removesuffix(".net.2"))
        group, units, what = 1, layer.in_features, "FFN neurons"
    elif name.endswith("to_out.0"):
        owner = model.get_submodule(name.removesuffix(".to_out.0"))
        check_head_removal(owner)
        group, units, what = head_dim(owner), owner.heads, "heads"
    else:
        raise ConfigError(
            f"structured pruning removes FFN neurons ('...ff.net.2') or heads ('...to_out.0'), not {name!r}"
        )
    n_remove = round(spec.sparsity * units)
    if n_remove >= units or (what == "heads" and n_remove == 0 and spec.sparsity > 0):
        raise ConfigError(
            f"sparsity {spec.sparsity} removes {n_remove} of the {units} {what} of {name!r}: "
            f"keep at least one and remove at least one"
        )
    if spec.method == "obs_structured":
        chunk = 1 if what == "heads" else spec.chunk  # heads are few and wide: one at a time
        updated, keep = obs_remove_columns(layer.weight.data, hessian, n_remove, group, chunk, spec.damp)
        layer.weight.data = updated.to(layer.weight.dtype)
    else:
        keep = l1_keep(layer.weight.data, n_remove, group)
    (remove_heads if what == "heads" else remove_ffn_neurons)(owner, keep)
    return layer.weight.data, keep
