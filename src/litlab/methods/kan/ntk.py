"""Empirical neural tangent kernel of a network and the spectral summaries the paper tracks."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn
from torch.func import functional_call, jacrev, vmap


def parameter_jacobian(net: nn.Module, x: Tensor, chunk_size: int | None = None) -> Tensor:
    """Jacobian of the (flattened) outputs w.r.t. all trainable parameters. x: (N, n_in) -> (N·n_out, P).

    Per-sample gradients via ``vmap(jacrev)``, so rows never mix samples (which matters for layers with
    batch statistics: those are evaluated one sample at a time, as in the NTK's definition).
    """
    params = {name: p.detach() for name, p in net.named_parameters() if p.requires_grad}
    buffers = dict(net.named_buffers())

    def single_output(p: dict[str, Tensor], sample: Tensor) -> Tensor:
        return functional_call(net, (p, buffers), (sample.unsqueeze(0),)).reshape(-1)

    jac = vmap(jacrev(single_output), in_dims=(None, 0), chunk_size=chunk_size)(params, x)
    n_rows = x.shape[0] * jac[next(iter(jac))].shape[1]
    return torch.cat([j.reshape(n_rows, -1) for j in jac.values()], dim=1)


def empirical_ntk(net: nn.Module, x: Tensor, chunk_size: int | None = None) -> Tensor:
    """K = J Jᵀ, the empirical NTK on x. x: (N, n_in) -> (N·n_out, N·n_out), in float64."""
    jac = parameter_jacobian(net, x, chunk_size).double()
    return jac @ jac.T


@dataclass(frozen=True)
class SpectrumSummary:
    """Eigenvalues (descending) and the scalars the paper reports for one kernel."""

    eigenvalues: Tensor
    condition_number: float
    effective_rank: float
    trace: float


def spectrum_summary(kernel: Tensor, floor: float = 1e-12) -> SpectrumSummary:
    """Condition number λ_max/λ_min (λ_min floored) and effective rank (Σλ)²/Σλ² of a PSD kernel."""
    eigenvalues = torch.linalg.eigvalsh(kernel).flip(0).clamp_min(0.0)
    total = eigenvalues.sum()
    return SpectrumSummary(
        eigenvalues=eigenvalues,
        condition_number=float(eigenvalues[0] / eigenvalues[-1].clamp_min(floor * eigenvalues[0])),
        effective_rank=float(total.square() / eigenvalues.square().sum().clamp_min(1e-300)),
        trace=float(total),
    )
