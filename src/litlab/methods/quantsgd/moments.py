"""Moments of quantized Gaussian data, per coordinate: what the quantized risk and the bound need.

For x_i ~ N(0, λ_i) and a data quantizer Q applied coordinate-wise (independently):
``second_i = E[Q(x_i)²]`` (the quantized spectrum λ^(q), H^(q) = diag(second) since coordinates stay
independent and symmetric), ``cross_i = E[Q(x_i)·x_i]`` (= λ_i when Q is unbiased) and the kurtosis
``E[Q(x_i)⁴]/E[Q(x_i)²]²`` (the fourth-moment constant α of the bound is its maximum, at least 3).
Closed forms for the idealised kinds; for rounding, the exact conditional moments averaged on a
Gaussian quantile grid, and only the small deviation from x is averaged, so the grid error is
relative to the quantization effect, not to λ.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from litlab.methods.quantsgd.quantizers import Quantizer, conditional_moments


@dataclass(frozen=True)
class DataMoments:
    """Per-coordinate moments of quantized data: ``second``, ``cross`` (d,), and ``kurtosis`` (max over i)."""

    second: torch.Tensor
    cross: torch.Tensor
    kurtosis: float

    def optimum(self, w_star: torch.Tensor) -> torch.Tensor:
        """w^(q) = argmin_w E[(Q(x)ᵀw − y)²] = cross·w*/second (0 where a coordinate has no variance)."""
        positive = self.second > 0
        return torch.where(positive, self.cross * w_star / torch.where(positive, self.second, 1.0), 0.0)

    def approximation_error(self, spectrum: torch.Tensor, w_star: torch.Tensor) -> torch.Tensor:
        """ApproxErr = min_w E[(Q(x)ᵀw − y)²] − σ² = ‖w*‖²_H − Σ cross²w*²/second."""
        return (spectrum * w_star**2).sum() - (self.cross * w_star * self.optimum(w_star)).sum()

    def quantized_risk(self, w: torch.Tensor, spectrum: torch.Tensor, w_star: torch.Tensor) -> torch.Tensor:
        """E[(Q(x)ᵀw − y)²] − σ² for ``w: (..., d)``: the risk on quantized test inputs, minus the noise."""
        return (self.second * w**2 - 2 * self.cross * w * w_star).sum(-1) + (spectrum * w_star**2).sum()


def gaussian_quantile_grid(n: int, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """Φ^-1((k + ½)/n), k < n: a deterministic stand-in for N(0, 1) samples (midpoint rule)."""
    return torch.special.ndtri((torch.arange(n, dtype=dtype) + 0.5) / n)


def data_moments(quantizer: Quantizer, spectrum: torch.Tensor, n_grid: int = 16384) -> DataMoments:
    """Moments of ``quantizer`` applied to x_i ~ N(0, spectrum_i), each ``(d,)`` like ``spectrum``."""
    eps = quantizer.eps if quantizer.active else 0.0
    kind = quantizer.kind if quantizer.active else "none"
    if kind == "none":
        return DataMoments(spectrum.clone(), spectrum.clone(), 3.0)
    if kind == "additive":
        return DataMoments(spectrum + eps, spectrum.clone(), 3.0)
    if kind == "multiplicative":
        return DataMoments(
            (1 + eps) * spectrum, spectrum.clone(), 3 * (1 + 6 * eps + 3 * eps**2) / (1 + eps) ** 2
        )
    u = gaussian_quantile_grid(n_grid, spectrum.dtype).to(spectrum.device)
    x = spectrum.sqrt()[:, None] * u  # (d, n_grid)
    first, second, fourth = conditional_moments(x, kind, eps)
    second_mean = spectrum + (second - x**2).mean(-1)
    cross = spectrum + ((first - x) * x).mean(-1)
    # E[Q⁴] ≈ 3λ²·(grid mean of E[Q⁴|x]) / (grid mean of x⁴), which cancels the grid's truncated tails.
    fourth_mean = 3 * spectrum**2 * fourth.mean(-1) / (x**4).mean(-1)
    positive = second_mean > 0
    kurtosis = (fourth_mean[positive] / second_mean[positive] ** 2).max().item() if positive.any() else 3.0
    return DataMoments(second_mean, cross, max(3.0, kurtosis))
