"""Git Re-Basin weight matching (Ainsworth et al., 2023) from a permutation spec, as DeepWeightFlow uses
it to canonicalise MLPs and CNNs.

A permutation ``perm`` of group p acts on every (parameter, axis) the spec assigns to p by
``w.index_select(axis, perm)``. Weight matching maximises Σ_w ⟨W_w^A, π(W^B)_w⟩_F over the permutations by
coordinate descent: each group's best permutation given the others is a linear assignment problem.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from scipy.optimize import linear_sum_assignment

from litlab.core.errors import LitlabError

Params = dict[str, torch.Tensor]
Perms = dict[str, torch.Tensor]


@dataclass(frozen=True)
class PermutationSpec:
    """``axes[name][i]`` is the permutation group acting on axis i of parameter ``name`` (None: none)."""

    axes: dict[str, tuple[str | None, ...]]

    def groups(self) -> dict[str, list[tuple[str, int]]]:
        """Group -> every (parameter, axis) it permutes."""
        out: dict[str, list[tuple[str, int]]] = {}
        for name, axes in self.axes.items():
            for axis, group in enumerate(axes):
                if group is not None:
                    out.setdefault(group, []).append((name, axis))
        return out

    def sizes(self, params: Params) -> dict[str, int]:
        """Group -> its permutation size, read from ``params`` (one network, no leading zoo axis)."""
        return {g: params[name].shape[axis] for g, [(name, axis), *_] in self.groups().items()}


def mlp_spec(n_layers: int, prefix: str = "layers") -> PermutationSpec:
    """Hidden layer i's units: rows of ``layers.i`` (weight, bias) and columns of ``layers.{i+1}``."""
    axes: dict[str, tuple[str | None, ...]] = {}
    for i in range(n_layers):
        out_group = f"P{i}" if i < n_layers - 1 else None
        in_group = f"P{i - 1}" if i > 0 else None
        axes[f"{prefix}.{i}.weight"] = (out_group, in_group)
        axes[f"{prefix}.{i}.bias"] = (out_group,)
    return PermutationSpec(axes)


def cnn_spec() -> PermutationSpec:
    """``SmallCNN``: each conv's output channels, shared by its BatchNorm (weights and running stats)."""
    axes: dict[str, tuple[str | None, ...]] = {}
    for i, following in ((1, "conv2.weight"), (2, "fc.weight")):
        group = f"P{i}"
        axes[f"conv{i}.bias"] = (group,)
        for stat in ("weight", "bias", "running_mean", "running_var"):
            axes[f"bn{i}.{stat}"] = (group,)
        axes[following] = (None, group, None, None) if following.startswith("conv") else (None, group)
    axes["conv1.weight"] = ("P1", None, None, None)
    axes["conv2.weight"] = ("P2", "P1", None, None)
    axes["fc.bias"] = (None,)
    return PermutationSpec(axes)


def spec_for(arch: dict) -> PermutationSpec:
    """The Git Re-Basin spec of a zoo architecture (MLP or CNN; ViTs use TransFusion)."""
    if arch["name"] == "mlp":
        return mlp_spec(len(arch["sizes"]) - 1)
    if arch["name"] == "cnn":
        return cnn_spec()
    raise LitlabError(f"no Git Re-Basin spec for {arch['name']!r}; attention networks use method=transfusion")


def permute_param(
    spec: PermutationSpec, perms: Perms, name: str, w: torch.Tensor, skip_axis: int = -1
) -> torch.Tensor:
    """``w`` with every spec'd axis except ``skip_axis`` permuted."""
    for axis, group in enumerate(spec.axes.get(name, ())):
        if group is not None and axis != skip_axis:
            w = w.index_select(axis, perms[group])
    return w


def apply_permutation(spec: PermutationSpec, perms: Perms, params: Params) -> Params:
    """π(params): one network's parameters with every group's permutation applied (outputs unchanged)."""
    return {name: permute_param(spec, perms, name, w) for name, w in params.items()}


def matching_objective(spec: PermutationSpec, params_a: Params, params_b: Params) -> float:
    """Σ_w ⟨W_w^A, W_w^B⟩ over the spec's parameters (B already permuted)."""
    return float(sum((params_a[n].double() * params_b[n].double()).sum() for n in spec.axes))


def weight_matching(
    spec: PermutationSpec,
    params_a: Params,
    params_b: Params,
    max_sweeps: int = 100,
    seed: int = 0,
) -> tuple[Perms, list[float]]:
    """Permutations of B that (locally) maximise Σ_w ⟨W_w^A, π(W^B)_w⟩ by coordinate descent.

    Groups are visited in a random order each sweep; group p solves the LAP on
    C_p = Σ_{(w, axis) ∈ p} A_w B̃_wᵀ (axis moved first, the rest flattened; B̃ with the other groups'
    current permutations). Stops after a sweep with no gain. Returns the permutations and the objective
    after every group update (non-decreasing).
    """
    groups = spec.groups()
    sizes = spec.sizes(params_a)
    perms = {g: torch.arange(n) for g, n in sizes.items()}
    rng = np.random.default_rng(seed)
    history = [matching_objective(spec, params_a, apply_permutation(spec, perms, params_b))]
    names = sorted(groups)
    for _ in range(max_sweeps):
        progress = False
        for g in rng.permutation(names):
            n = sizes[g]
            cost = torch.zeros(n, n, dtype=torch.float64)
            for name, axis in groups[g]:
                w_a = params_a[name].double().movedim(axis, 0).reshape(n, -1)
                w_b = permute_param(spec, perms, name, params_b[name], skip_axis=axis)
                cost += w_a @ w_b.double().movedim(axis, 0).reshape(n, -1).T
            _, cols = linear_sum_assignment(cost.numpy(), maximize=True)
            new = torch.as_tensor(cols, dtype=torch.long)
            old_value = cost[torch.arange(n), perms[g]].sum()
            new_value = cost[torch.arange(n), new].sum()
            if new_value > old_value + 1e-12 * max(1.0, abs(float(old_value))):
                perms[g] = new
                progress = True
            history.append(matching_objective(spec, params_a, apply_permutation(spec, perms, params_b)))
        if not progress:
            break
    return perms, history
