"""Gaussian kernel features over a grid of bandwidths, their Nyström (RKHS) whitening, and the median
heuristic. Every function works on float64 tensors and is batched over the bandwidths."""

from __future__ import annotations

import torch


def gaussian_features(x: torch.Tensor, centres: torch.Tensor, sigmas: torch.Tensor) -> torch.Tensor:
    """Φ_s(x)_j = exp(−‖x − c_j‖² / (2σ_s²)) for ``x: (n, d)``, ``centres: (b, d)``, ``sigmas: (S,)``;
    returns ``(S, n, b)``."""
    sq = torch.cdist(x, centres).square()
    return torch.exp(-sq[None] / (2 * sigmas.square()[:, None, None]))


def nystrom_transforms(centres: torch.Tensor, sigmas: torch.Tensor, rcond: float = 1e-10) -> torch.Tensor:
    """T_s = V Λ^{−1/2} of K_s = k_σs(C, C), ``(S, b, b)`` (eigenpairs above ``rcond``·λ_max; others zeroed).

    Features Ψ = Φ T make f = Ψu an element of span{k(·, c_j)} with ‖f‖²_RKHS = ‖u‖², so an RKHS-norm
    penalty becomes a ridge penalty, solved stably even where K_s is numerically singular.
    """
    gram = gaussian_features(centres, centres, sigmas)
    values, vectors = torch.linalg.eigh(gram)
    keep = values > rcond * values[:, -1:]
    scale = torch.where(keep, values.clamp_min(torch.finfo(values.dtype).tiny).rsqrt(), 0.0)
    return vectors * scale[:, None, :]


def median_distance(x: torch.Tensor, max_points: int = 1000) -> float:
    """The median pairwise Euclidean distance among the first ``max_points`` rows (the median heuristic)."""
    x = x[:max_points]
    distances = torch.pdist(x)
    return float(distances.median())


def bandwidth_grid(x: torch.Tensor, factors: list[float] | tuple[float, ...]) -> torch.Tensor:
    """``factors`` × the median distance of ``x``, as a float64 ``(S,)`` tensor."""
    return torch.tensor(factors, dtype=torch.float64) * median_distance(x)
