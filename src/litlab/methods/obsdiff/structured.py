"""Structured OBS: remove whole groups of input columns (FFN neurons, attention heads) with the group-OBS
update, then cut them out of the model.

Removing the column set R of W (rows, cols) and compensating in the remaining columns S minimises
‖(W − Ŵ) X‖² at ΔW_S = −W_R [H⁻¹]_RR⁻¹ [H⁻¹]_RS (H⁻¹ over the columns still alive), at the cost
tr(W_R [H⁻¹]_RR⁻¹ W_Rᵀ). A group is one column (an FFN neuron, the input of ``ff.net.2``) or ``head_dim``
consecutive columns (an attention head, its slice of the input of ``to_out.0``). Groups go in chunks,
lowest cost first, with H⁻¹ recomputed on the survivors between chunks (the iterative scheme of the
official SlimGPT-style code, written here with the exact inverse and the exact group cost).
"""

from __future__ import annotations

import torch
from torch import nn

from litlab.core.errors import ConfigError


def _columns(groups: torch.Tensor, size: int) -> torch.Tensor:
    """Column indices of the given group indices (groups of ``size`` consecutive columns)."""
    return (groups.unsqueeze(1) * size + torch.arange(size, device=groups.device)).flatten()


def obs_remove_columns(
    weight: torch.Tensor,
    hessian: torch.Tensor,
    n_remove: int,
    group: int = 1,
    chunk: int = 8,
    damp: float = 0.01,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Remove ``n_remove`` groups of ``group`` consecutive input columns with the group-OBS update.

    Returns (updated weight (rows, cols) with the removed columns zeroed, sorted indices of kept groups).
    """
    rows, cols = weight.shape
    if group < 1 or cols % group:
        raise ConfigError(f"{cols} columns do not split into groups of {group}")
    n_groups = cols // group
    if not 0 <= n_remove < n_groups:
        raise ConfigError(f"cannot remove {n_remove} of {n_groups} column groups")
    w = weight.detach().double().clone()
    h = hessian.detach().double().clone()
    idx = torch.arange(cols, device=h.device)
    h[idx, idx] += damp * h.diagonal().mean() + (h.diagonal() == 0).double()
    alive = torch.ones(n_groups, dtype=torch.bool, device=w.device)
    removed = 0
    while removed < n_remove:
        keep = alive.nonzero().squeeze(1)
        kept_cols = _columns(keep, group)
        inverse = torch.linalg.inv(h[kept_cols][:, kept_cols])
        k = len(keep)
        blocks = inverse.reshape(k, group, k, group).diagonal(dim1=0, dim2=2).permute(2, 0, 1)  # (k, g, g)
        w_groups = w[:, kept_cols].reshape(rows, k, group).permute(1, 2, 0)  # (k, g, rows)
        cost = (w_groups * torch.linalg.solve(blocks, w_groups)).sum((1, 2))  # tr(W_G B⁻¹ W_Gᵀ)
        local = cost.topk(min(chunk, n_remove - removed), largest=False).indices
        local_cols = _columns(local, group)
        update = torch.linalg.solve(inverse[local_cols][:, local_cols], inverse[local_cols])  # (|R|, |S|)
        w[:, kept_cols] -= w[:, kept_cols[local_cols]] @ update
        w[:, kept_cols[local_cols]] = 0.0
        alive[keep[local]] = False
        removed += len(local)
    return w.to(weight.dtype), alive.nonzero().squeeze(1)


def l1_keep(weight: torch.Tensor, n_remove: int, group: int = 1) -> torch.Tensor:
    """The L1-norm baseline: keep the groups of ``group`` columns with the largest Σ|W| (sorted group
    indices), no update."""
    score = weight.detach().abs().sum(0).reshape(-1, group).sum(1)
    return score.argsort(descending=True)[: len(score) - n_remove].sort().values


def shrink_linear(layer: nn.Linear, keep: torch.Tensor, dim: int) -> nn.Linear:
    """A new Linear holding only the ``keep`` outputs (dim 0) or inputs (dim 1) of ``layer``."""
    weight = layer.weight.detach().index_select(dim, keep.to(layer.weight.device))
    out_features, in_features = weight.shape
    new = nn.Linear(in_features, out_features, bias=layer.bias is not None)
    new = new.to(device=weight.device, dtype=weight.dtype)
    new.weight.data.copy_(weight)
    if layer.bias is not None:
        bias = layer.bias.detach()
        new.bias.data.copy_(bias.index_select(0, keep.to(bias.device)) if dim == 0 else bias)
    return new


def remove_ffn_neurons(feed_forward: nn.Module, keep: torch.Tensor) -> None:
    """Cut a diffusers ``FeedForward`` to the ``keep`` hidden neurons: rows of ``net.0.proj`` and columns
    of ``net.2`` (in place)."""
    project_in = feed_forward.net[0].proj
    feed_forward.net[0].proj = shrink_linear(project_in, keep, 0)
    feed_forward.net[2] = shrink_linear(feed_forward.net[2], keep, 1)


def head_dim(attention: nn.Module) -> int:
    """Width of one head of a diffusers ``Attention`` (query features per head)."""
    return attention.to_q.out_features // attention.heads


def check_head_removal(attention: nn.Module) -> None:
    """A one-line error for attention whose heads ``remove_heads`` cannot cut (joint or grouped-KV)."""
    if getattr(attention, "to_add_out", None) is not None or getattr(attention, "add_k_proj", None):
        raise ConfigError("head removal of joint (MMDiT) attention with add_*_proj is not implemented")
    if attention.to_k.out_features != attention.to_q.out_features:
        raise ConfigError("head removal needs as many key/value heads as query heads (no grouped KV)")


def remove_heads(attention: nn.Module, keep: torch.Tensor) -> None:
    """Cut a diffusers ``Attention`` to the ``keep`` heads (in place): their rows of ``to_q/to_k/to_v``,
    their columns of ``to_out.0``, and the head count and inner widths its processor reads."""
    check_head_removal(attention)
    if len(keep) == 0:
        raise ConfigError(f"cannot remove all {attention.heads} heads of an attention module")
    cols = _columns(keep, head_dim(attention))
    for name in ("to_q", "to_k", "to_v"):
        setattr(attention, name, shrink_linear(getattr(attention, name), cols, 0))
    attention.to_out[0] = shrink_linear(attention.to_out[0], cols, 1)
    attention.heads = attention.sliceable_head_dim = len(keep)
    attention.inner_dim = attention.inner_kv_dim = len(cols)
