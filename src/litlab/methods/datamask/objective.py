"""The joint quality + diversity objective of a subset, for batches of masks and for one index set.

J(m) = λ·q̄(m) − (1 − λ)·D(m) − μ·(|m|/n − r)², with q̄ the mean quality of the selected documents and
D(m) = ‖(1/|m|)·Σᵢ mᵢ eᵢeᵢᵀ‖_F the Frobenius norm of the (uncentred) covariance of their unit embeddings,
as in DiSF: its trace is 1, so it is smallest (1/√d) when the selection spreads evenly over all directions
and 1 when every selected document points the same way. ‖Σᵢ mᵢeᵢeᵢᵀ‖²_F = mᵀKm with Kᵢⱼ = (eᵢ·eⱼ)², which
is how a mask is scored in O(n²) inside a shard of n documents instead of O(n·d²).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


def second_moment_kernel(embeddings: torch.Tensor) -> torch.Tensor:
    """``(..., n, n)``: Kᵢⱼ = (eᵢ·eⱼ)² for ``embeddings (..., n, d)``, so mᵀKm = ‖Σᵢ mᵢeᵢeᵢᵀ‖²_F."""
    return (embeddings @ embeddings.transpose(-1, -2)).square()


@dataclass
class Context:
    """The rest of the selection a shard's masks join: per shard ``(S,)`` its size, quality sum and
    ‖C‖²_F (C = its Σ eeᵀ), and per document ``cross (S, n)`` = eᵢᵀCeᵢ. All zero: the shard alone."""

    size: torch.Tensor
    quality_sum: torch.Tensor
    frobenius_sq: torch.Tensor
    cross: torch.Tensor


def joint_weights(
    quality: torch.Tensor, kernel: torch.Tensor, context: Context | None = None
) -> torch.Tensor:
    """``(..., n + 2, n)``: the rows of K + 2·diag(cross), then q and 1. One matmul with a binary mask gives
    Km + 2·m∘cross, q·m and |m| together (mᵢ² = mᵢ folds the context's cross term into K's diagonal; K is
    symmetric). Rows, not columns: the batched product with masks stored ``(..., n, G)`` runs 1.6× faster."""
    if context is not None:
        kernel = kernel + torch.diag_embed(2 * context.cross)
    return torch.cat([kernel, quality.unsqueeze(-2), torch.ones_like(quality).unsqueeze(-2)], -2)


def mask_objective(
    masks: torch.Tensor,
    quality: torch.Tensor,
    kernel: torch.Tensor,
    lam: float,
    mu: float,
    ratio: float,
    n_valid: torch.Tensor | float,
    context: Context | None = None,
    weights: torch.Tensor | None = None,
) -> torch.Tensor:
    """``(..., G)`` J of each mask. ``masks (..., G, n)`` in {0, 1}; ``quality (..., n)``; ``kernel
    (..., n, n)`` from ``second_moment_kernel``; ``n_valid`` the documents a mask may pick (the shard
    size without padding). With a ``context`` (batch dims ``(...)`` = shards) all three terms are those
    of the mask joined to the context, ‖C + Σ mᵢeᵢeᵢᵀ‖² = ‖C‖² + 2·Σ mᵢ·eᵢᵀCeᵢ + mᵀKm, and ``n_valid``
    is the whole pool's size. ``weights``: ``joint_weights(quality, kernel, context)`` precomputed, so a
    call is one batched matmul. An empty selection has q̄ = D = 0."""
    if weights is None:
        weights = joint_weights(quality, kernel, context)
    n, columns = masks.shape[-1], masks.mT  # ``sample_masks`` stores masks as (..., n, G): then a view
    scored = weights @ columns  # (..., n + 2, G)
    frobenius_sq = (scored[..., :n, :] * columns).sum(-2)
    quality_sum, total = scored[..., n, :], scored[..., n + 1, :]
    if context is not None:
        total = total + context.size.unsqueeze(-1)
        quality_sum = quality_sum + context.quality_sum.unsqueeze(-1)
        frobenius_sq += context.frobenius_sq.unsqueeze(-1)
    denom = total.where(total > 0, 1.0)
    # (λ·Σq − (1 − λ)·‖Σ eeᵀ‖_F) / |m| − μ·(|m|/n − r)², in place on fresh tensors (a step's largest tensors)
    value = frobenius_sq.clamp_min_(0.0).sqrt_().mul_(lam - 1.0).add_(quality_sum, alpha=lam).div_(denom)
    return value.sub_((total / n_valid).sub_(ratio).square_().mul_(mu))


def subset_objective(
    indices: torch.Tensor, quality: torch.Tensor, embeddings: torch.Tensor, lam: float
) -> dict[str, float]:
    """The objective of one selection ``indices`` of the pool (``quality (N,)``, ``embeddings (N, d)``),
    without the budget term: ``objective``, ``quality`` (q̄) and ``diversity_norm`` (D), in float64."""
    chosen = embeddings[indices].double()
    moment = chosen.T @ chosen / max(len(indices), 1)
    mean_quality = quality[indices].double().mean().item()
    frobenius = torch.linalg.matrix_norm(moment).item()
    return {
        "objective": lam * mean_quality - (1 - lam) * frobenius,
        "quality": mean_quality,
        "diversity_norm": frobenius,
    }
