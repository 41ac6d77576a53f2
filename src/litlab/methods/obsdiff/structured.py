"""Structured OBS: remove whole input columns (FFN neurons) with the group-OBS update, then cut them out.

Removing the column set R of W (rows, cols) and compensating in the remaining columns S minimises
‖(W − Ŵ) X‖² at ΔW_S = −W_R [H⁻¹]_RR⁻¹ [H⁻¹]_RS (H⁻¹ over the columns still alive). Columns go in chunks,
lowest saliency ‖W_:,c‖² / [H⁻¹]_cc first, with H⁻¹ recomputed on the survivors between chunks (the
iterative scheme of the official SlimGPT-style code, written here with the exact inverse).
"""

from __future__ import annotations

import torch
from torch import nn

from litlab.core.errors import ConfigError


def obs_remove_columns(
    weight: torch.Tensor, hessian: torch.Tensor, n_remove: int, chunk: int = 8, damp: float = 0.01
) -> tuple[torch.Tensor, torch.Tensor]:
    """(updated weight (rows, cols) with removed columns zeroed, sorted indices of the kept columns)."""
    cols = weight.shape[1]
    if not 0 <= n_remove < cols:
        raise ConfigError(f"cannot remove {n_remove} of {cols} columns")
    w = weight.detach().double().clone()
    h = hessian.detach().double().clone()
    idx = torch.arange(cols, device=h.device)
    h[idx, idx] += damp * h.diagonal().mean() + (h.diagonal() == 0).double()
    alive = torch.ones(cols, dtype=torch.bool, device=w.device)
    removed = 0
    while removed < n_remove:
        keep = alive.nonzero().squeeze(1)
        inverse = torch.linalg.inv(h[keep][:, keep])
        saliency = w[:, keep].square().sum(0) / inverse.diagonal()
        local = saliency.topk(min(chunk, n_remove - removed), largest=False).indices
        update = torch.linalg.solve(inverse[local][:, local], inverse[local])  # (|R|, |S|)
        w[:, keep] -= w[:, keep[local]] @ update
        w[:, keep[local]] = 0.0
        alive[keep[local]] = False
        removed += len(local)
    return w.to(weight.dtype), alive.nonzero().squeeze(1)


def l1_keep(weight: torch.Tensor, n_remove: int) -> torch.Tensor:
    """The L1-norm baseline: keep the columns with the largest Σ|W_:,c| (sorted indices), no update."""
    order = weight.detach().abs().sum(0).argsort(descending=True)
    return order[: weight.shape[1] - n_remove].sort().values


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
