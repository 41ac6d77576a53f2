"""The five KAN initialisation schemes of Rigas et al. (ICLR 2026), following the official jaxKAN code.

Every scheme but the baseline draws r ~ N(0, σ_r²) and b ~ N(0, σ_b²), with S = G + k + 1 terms per
input (G + k basis functions plus the residual) sharing the variance, and gain g = std U(-1, 1) = 1/√3:

- ``baseline``:          r ~ GlorotUniform(n_in, n_out), b ~ N(0, 0.1²)
- ``lecun_numerical``:   σ_b = g/√(n_in S μ_B),  σ_r = g/√(n_in S μ_R)
- ``lecun_normalized``:  σ_b = g/√(n_in S),  σ_r = g/√(n_in S μ_R); the layer batch-standardises its basis
- ``glorot``:            σ_b = g √(2/(S (n_in μ_B + n_out μ_B′))),  σ_r = g √(2/(S (n_in μ_R + n_out μ_R′)))
- ``power``:             σ_b = (n_in S)^-β,  σ_r = (n_in S)^-α
- ``zero_spline``:       r as the baseline, b = 0. Not the paper's: the trivial baseline that power with a
  large β comes close to, a KAN that starts as a SiLU MLP with its splines off.

The moments μ come from ``litlab.methods.kan.moments`` (inputs U(-1, 1), grid over [-1, 1], as in the
paper, whatever a layer's ``grid_range``). c = 1 and bias = 0 in every scheme.

Two ablation flags take the paper's rule apart (both on by default):

- ``moments=False`` (LeCun, Glorot): every μ set to 1, the plain fan-in/fan-out rule over the n_in S terms
  that ignores what the B-splines and SiLU do to a U(-1, 1) input.
- ``split=False`` (any scheme; the trivial "right scale, not the rule" baseline): r and b share one σ,
  chosen so that each layer's output second moment at init, n_in (σ_r² μ_R + (G + k) σ_b² μ_B), equals the
  scheme's own. It keeps the scheme's overall scale and drops its split between the two branches.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from litlab.methods.kan.moments import KANMoments, kan_moments

if TYPE_CHECKING:
    from litlab.methods.kan.layers import KANLayer

GAIN = 1.0 / math.sqrt(3.0)
BASELINE_SPLINE_STD = 0.1


def n_terms(grid_size: int, spline_order: int) -> int:
    """S = G + k + 1: the basis functions plus the residual, the terms each input contributes."""
    return grid_size + spline_order + 1


def _moments(grid_size: int, spline_order: int, use_moments: bool) -> KANMoments:
    """The layer's moments, or all of them 1 (the ``moments=False`` ablation)."""
    return kan_moments(grid_size, spline_order) if use_moments else KANMoments(1.0, 1.0, 1.0, 1.0)


def baseline_stds(
    n_in: int, n_out: int, grid_size: int, spline_order: int = 3, *, use_moments: bool = True
) -> tuple[float, float]:
    """(σ_b, σ_r) of the baseline; σ_r is the std of GlorotUniform, √(2/(n_in + n_out)), drawn uniform."""
    return BASELINE_SPLINE_STD, math.sqrt(2.0 / (n_in + n_out))


def zero_spline_stds(
    n_in: int, n_out: int, grid_size: int, spline_order: int = 3, *, use_moments: bool = True
) -> tuple[float, float]:
    """(0, σ_r of the baseline): the baseline's GlorotUniform residual and the spline branch off at init."""
    return 0.0, baseline_stds(n_in, n_out, grid_size, spline_order)[1]


def lecun_numerical_stds(
    n_in: int, n_out: int, grid_size: int, spline_order: int = 3, *, use_moments: bool = True
) -> tuple[float, float]:
    """(σ_b, σ_r) keeping E[y²] = g² for inputs ~ U(-1, 1): σ_b = g/√(n_in S μ_B), σ_r = g/√(n_in S μ_R)."""
    m = _moments(grid_size, spline_order, use_moments)
    fan = n_in * n_terms(grid_size, spline_order)
    return GAIN / math.sqrt(fan * m.mu_b), GAIN / math.sqrt(fan * m.mu_r)


def lecun_normalized_stds(
    n_in: int, n_out: int, grid_size: int, spline_order: int = 3, *, use_moments: bool = True
) -> tuple[float, float]:
    """(σ_b, σ_r) for batch-standardised bases (E[B̂²] = 1): σ_b = g/√(n_in S), σ_r = g/√(n_in S μ_R)."""
    m = _moments(grid_size, spline_order, use_moments)
    fan = n_in * n_terms(grid_size, spline_order)
    return GAIN / math.sqrt(fan), GAIN / math.sqrt(fan * m.mu_r)


def glorot_stds(
    n_in: int, n_out: int, grid_size: int, spline_order: int = 3, *, use_moments: bool = True
) -> tuple[float, float]:
    """(σ_b, σ_r) balancing forward and backward variance: g √(2/(S (n_in μ + n_out μ′))) per branch."""
    m = _moments(grid_size, spline_order, use_moments)
    s = n_terms(grid_size, spline_order)
    sigma_b = GAIN * math.sqrt(2.0 / (s * (n_in * m.mu_b + n_out * m.mu_b_prime)))
    sigma_r = GAIN * math.sqrt(2.0 / (s * (n_in * m.mu_r + n_out * m.mu_r_prime)))
    return sigma_b, sigma_r


def power_stds(
    n_in: int,
    n_out: int,
    grid_size: int,
    spline_order: int = 3,
    *,
    alpha: float,
    beta: float,
    use_moments: bool = True,
) -> tuple[float, float]:
    """(σ_b, σ_r) = ((n_in S)^-β, (n_in S)^-α): the empirical power law, α residual, β basis."""
    fan = n_in * n_terms(grid_size, spline_order)
    return fan**-beta, fan**-alpha


def shared_std(
    sigma_b: float, sigma_r: float, grid_size: int, spline_order: int, standardized: bool
) -> float:
    """One σ for r and b giving a layer the same output second moment as (σ_b, σ_r) (the ``split=False``
    baseline): σ² (μ_R + (G + k) μ_B) = σ_r² μ_R + (G + k) σ_b² μ_B, with μ_B = 1 for a standardised basis."""
    m = kan_moments(grid_size, spline_order)
    n_basis = grid_size + spline_order
    mu_b = 1.0 if standardized else m.mu_b
    return math.sqrt((sigma_r**2 * m.mu_r + n_basis * sigma_b**2 * mu_b) / (m.mu_r + n_basis * mu_b))


# Schemes whose formulas use the moments μ (the only ones ``moments=False`` changes).
USES_MOMENTS = ("lecun_numerical", "lecun_normalized", "glorot")

SCHEMES: dict[str, Callable[..., tuple[float, float]]] = {
    "baseline": baseline_stds,
    "lecun_numerical": lecun_numerical_stds,
    "lecun_normalized": lecun_normalized_stds,
    "glorot": glorot_stds,
    "power": power_stds,
    "zero_spline": zero_spline_stds,
}


@dataclass(frozen=True)
class InitScheme:
    """A scheme by name, power's exponents and the two ablation flags (module docstring).

    Hydra: ``{name: power, alpha: 0.25, beta: 1.75}``, ``{name: glorot, moments: false}``,
    ``{name: glorot, split: false}``.
    """

    name: str = "baseline"
    alpha: float | None = None
    beta: float | None = None
    moments: bool = True
    split: bool = True

    def __post_init__(self) -> None:
        if self.name not in SCHEMES:
            raise ValueError(f"unknown KAN init scheme {self.name!r}; valid names: {', '.join(SCHEMES)}")
        has_exponents = (self.alpha is not None, self.beta is not None)
        if self.name == "power" and not all(has_exponents):
            raise ValueError("init scheme 'power' needs both alpha (residual) and beta (basis)")
        if self.name != "power" and any(has_exponents):
            raise ValueError(f"alpha and beta apply only to init scheme 'power', not {self.name!r}")
        if not self.moments and self.name not in USES_MOMENTS:
            raise ValueError(
                f"moments=false applies only to {', '.join(USES_MOMENTS)}; {self.name!r} uses no moments"
            )

    @property
    def label(self) -> str:
        """A short name for tables: ``glorot``, ``power(0.25,1.75)``, ``glorot/no_moments/no_split``."""
        label = f"power({self.alpha:g},{self.beta:g})" if self.name == "power" else self.name
        return label + ("" if self.moments else "/no_moments") + ("" if self.split else "/no_split")

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
        sigma_b, sigma_r = SCHEMES[self.name](
            n_in, n_out, grid_size, spline_order, use_moments=self.moments, **exponents
        )
        if self.split:
            return sigma_b, sigma_r
        sigma = shared_std(sigma_b, sigma_r, grid_size, spline_order, self.standardize_basis)
        return sigma, sigma

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
        if self.name in ("baseline", "zero_spline") and self.split:
            bound = math.sqrt(3.0) * sigma_r
            torch.nn.init.uniform_(layer.residual_weight, -bound, bound, generator=generator)
        else:
            torch.nn.init.normal_(layer.residual_weight, std=sigma_r, generator=generator)
        torch.nn.init.ones_(layer.spline_scale)
        torch.nn.init.zeros_(layer.bias)
