"""The five KAN initialisation schemes of Rigas et al. (ICLR 2026), following the official jaxKAN code.

Every scheme but the baseline draws r ~ N(0, σ_r²) and b ~ N(0, σ_b²), with S = G + k + 1 terms per
input (G + k basis functions plus the residual) sharing the variance, and gain g = std U(-1, 1) = 1/√3:

- ``baseline``:          r ~ GlorotUniform(n_in, n_out), b ~ N(0, 0.1²)
- ``lecun_numerical``:   σ_b = g/√(n_in S μ_B),  σ_r = g/√(n_in S μ_R)
- ``lecun_normalized``:  σ_b = g/√(n_in S),  σ_r = g/√(n_in S μ_R); the layer batch-standardises its basis
- ``glorot``:            σ_b = g √(2/(S (n_in μ_B + n_out μ_B′))),  σ_r = g √(2/(S (n_in μ_R + n_out μ_R′)))
- ``power``:             σ_b = (n_in S)^-β,  σ_r = (n_in S)^-α

The moments μ come from ``litlab.methods.kan.moments`` (inputs U(-1, 1), grid over [-1, 1], as in the
paper, whatever a layer's ``grid_range``). c = 1 and bias = 0 in every scheme.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from litlab.methods.kan.moments import kan_moments

if TYPE_CHECKING:
    from litlab.methods.kan.layers import KANLayer

GAIN = 1.0 / math.sqrt(3.0)
BASELINE_SPLINE_STD = 0.1


def n_terms(grid_size: int, spline_order: int) -> int:
    """S = G + k + 1: the basis functions plus the residual, the terms each input contributes."""
    return grid_size + spline_order + 1


def baseline_stds(n_in: int, n_out: int, grid_size: int, spline_order: int = 3) -> tuple[float, float]:
    """(σ_b, σ_r) of the baseline; σ_r is the std of GlorotUniform, √(2/(n_in + n_out)), drawn uniform."""
    return BASELINE_SPLINE_STD, math.sqrt(2.0 / (n_in + n_out))


def lecun_numerical_stds(n_in: int, n_out: int, grid_size: int, spline_order: int = 3) -> tuple[float, float]:
    """(σ_b, σ_r) keeping E[y²] = g² for inputs ~ U(-1, 1): σ_b = g/√(n_in S μ_B), σ_r = g/√(n_in S μ_R)."""
    m = kan_moments(grid_size, spline_order)
    fan = n_in * n_terms(grid_size, spline_order)
    return GAIN / math.sqrt(fan * m.mu_b), GAIN / math.sqrt(fan * m.mu_r)


def lecun_normalized_stds(
    n_in: int, n_out: int, grid_size: int, spline_order: int = 3
) -> tuple[float, float]:
    """(σ_b, σ_r) for batch-standardised bases (E[B̂²] = 1): σ_b = g/√(n_in S), σ_r = g/√(n_in S μ_R)."""
    m = kan_moments(grid_size, spline_order)
    fan = n_in * n_terms(grid_size, spline_order)
    return GAIN / math.sqrt(fan), GAIN / math.sqrt(fan * m.mu_r)


def glorot_stds(n_in: int, n_out: int, grid_size: int, spline_order: int = 3) -> tuple[float, float]:
    """(σ_b, σ_r) balancing forward and backward variance: g √(2/(S (n_in μ + n_out μ′))) per branch."""
    m = kan_moments(grid_size, spline_order)
    s = n_terms(grid_size, spline_order)
    sigma_b = GAIN * math.sqrt(2.0 / (s * (n_in * m.mu_b + n_out * m.mu_b_prime)))
    sigma_r = GAIN * math.sqrt(2.0 / (s * (n_in * m.mu_r + n_out * m.mu_r_prime)))
    return sigma_b, sigma_r


def power_stds(
    n_in: int, n_out: int, grid_size: int, spline_order: int = 3, *, alpha: float, beta: float
) -> tuple[float, float]:
    """(σ_b, σ_r) = ((n_in S)^-β, (n_in S)^-α): the empirical power law, α residual, β basis."""
    fan = n_in * n_terms(grid_size, spline_order)
    return fan**-beta, fan**-alpha


SCHEMES: dict[str, Callable[..., tuple[float, float]]] = {
    "baseline": baseline_stds,
    "lecun_numerical": lecun_numerical_stds,
    "lecun_normalized": lecun_normalized_stds,
    "glorot": glorot_stds,
    "power": power_stds,
}


@dataclass(frozen=True)
class InitScheme:
    """A scheme by name, plus power's exponents; Hydra: ``{name: power, alpha: 0.25, beta: 1.75}``."""

    name: str = "baseline"
    alpha: float | None = None
    beta: float | None = None

    def __post_init__(self) -> None:
        if self.name not in SCHEMES:
            raise ValueError(f"unknown KAN init scheme {self.name!r}; valid names: {', '.join(SCHEMES)}")
        has_exponents = (self.alpha is not None, self.beta is not None)
        if self.name == "power" and not all(has_exponents):
            raise ValueError("init scheme 'power' needs both alpha (residual) and beta (basis)")
        if self.name != "power" and any(has_exponents):
            raise ValueError(f"alpha and beta apply only to init scheme 'power', not {self.name!r}")

    @classmethod
    def from_config(cls, spec: InitScheme | Mapping[str, Any] | str) -> InitScheme:
        """Accept a scheme, a name, or a mapping such as a Hydra DictConfig (unknown keys are an error)."""
        if isinstance(spec, InitScheme):
            return spec
        if isinstance(spec, str):
            return cls(name=spec)
        return cls(**dict(spec))

    @property
    def standardize_basis(self) -> bool:
        """Whether layers under this scheme batch-standardise their basis outputs (LeCun-normalized)."""
        return self.name == "lecun_normalized"

    def stds(self, n_in: int, n_out: int, grid_size: int, spline_order: int = 3) -> tuple[float, float]:
        """(σ_b, σ_r) for a layer of this shape."""
        exponents = {"alpha": self.alpha, "beta": self.beta} if self.name == "power" else {}
        return SCHEMES[self.name](n_in, n_out, grid_size, spline_order, **exponents)

    @torch.no_grad()
    def apply(self, layer: KANLayer, generator: torch.Generator | None = None) -> None:
        """Draw the layer's r and b, and reset c = 1 and bias = 0."""
        if layer.standardize_basis != self.standardize_basis:
            raise ValueError(
                f"init scheme {self.name!r} needs standardize_basis={self.standardize_basis}, "
                f"the layer has {layer.standardize_basis}"
            )
        sigma_b, sigma_r = self.stds(layer.n_in, layer.n_out, layer.grid_size, layer.spline_order)
        torch.nn.init.normal_(layer.spline_weight, std=sigma_b, generator=generator)
        if self.name == "baseline":
            bound = math.sqrt(3.0) * sigma_r
            torch.nn.init.uniform_(layer.residual_weight, -bound, bound, generator=generator)
        else:
            torch.nn.init.normal_(layer.residual_weight, std=sigma_r, generator=generator)
        torch.nn.init.ones_(layer.spline_scale)
        torch.nn.init.zeros_(layer.bias)
