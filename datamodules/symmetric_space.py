"""A synthetic data set whose latent space is a known symmetric space: the sphere S² = SO(3)/SO(2).

A template (a bump of sensor readings centred on the base point o = e₀) is moved by exp(X) with X in
p = span(P₁, P₂), P_j = E_{0j} − E_{j0}: the observation of factors θ = (θ₁, θ₂) is the vector of D
sensor readings y_i = exp(κ(s_i · exp(θ₁P₁ + θ₂P₂) e₀ − 1)) in (0, 1]. so(3) = k ⊕ p with k = span(E₁₂ −
E₂₁) is the true Cartan pair, and the geodesic symmetry s_o maps the observation of θ to that of −θ.
The held-out combinations are the corner θ₁ ≥ h, θ₂ ≥ h; the training corner θ₁ ≤ −h, θ₂ ≤ −h is its
geodesic mirror image, so the mirror −X of an observed latent should decode to a held-out observation.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch


def sphere_algebra() -> tuple[torch.Tensor, torch.Tensor]:
    """(k (1, 3, 3), p (2, 3, 3)): the Cartan pair so(2) ⊕ p of so(3) for S² = SO(3)/SO(2)."""

    def generator(i: int, j: int) -> torch.Tensor:
        e = torch.zeros(3, 3, dtype=torch.float64)
        e[i, j], e[j, i] = 1.0, -1.0
        return e

    return generator(1, 2)[None], torch.stack([generator(0, 1), generator(0, 2)])


def fibonacci_sensors(n: int) -> torch.Tensor:
    """n near-uniform unit vectors on S² (n, 3) (the Fibonacci lattice): the template's sensor directions."""
    i = torch.arange(n, dtype=torch.float64) + 0.5
    z = 1 - 2 * i / n
    phi = math.pi * (1 + 5**0.5) * i
    r = (1 - z.square()).sqrt()
    return torch.stack([z, r * phi.cos(), r * phi.sin()], dim=1)


def sphere_points(theta: torch.Tensor) -> torch.Tensor:
    """exp(θ₁P₁ + θ₂P₂) e₀ (n, 3) for factors θ (n, 2): the point of S² the factors name."""
    _, p = sphere_algebra()
    x = torch.einsum("nj,jab->nab", theta.double(), p)
    return torch.linalg.matrix_exp(x)[:, :, 0]


def observe(theta: torch.Tensor, sensors: torch.Tensor, kappa: float) -> torch.Tensor:
    """Sensor readings (n, D) in (0, 1] of the template moved to factors θ (n, 2), float32."""
    return torch.exp(kappa * (sphere_points(theta) @ sensors.T - 1)).float()


@dataclass
class SymmetricSpaceData:
    """Train / validation / held-out observations (n, D) with their factors (n, 2), and the generator."""

    train: tuple[torch.Tensor, torch.Tensor]
    val: tuple[torch.Tensor, torch.Tensor]
    heldout: tuple[torch.Tensor, torch.Tensor]
    sensors: torch.Tensor
    kappa: float
    extent: float
    margin: float

    def observe(self, theta: torch.Tensor) -> torch.Tensor:
        """Observations (n, D) of any factors θ (n, 2)."""
        return observe(theta, self.sensors, self.kappa)

    def mirror_sources(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Training observations whose mirror factors −θ are held out, with those factors θ."""
        y, theta = self.train
        inside = (theta <= -self.margin).all(dim=1)
        return y[inside], theta[inside]


def symmetric_space_data(
    n_grid: int = 24,
    extent: float = 1.2,
    margin: float = 0.3,
    n_sensors: int = 32,
    kappa: float = 2.0,
    val_fraction: float = 0.1,
    seed: int = 0,
) -> SymmetricSpaceData:
    """The n_grid × n_grid factor grid on [−extent, extent]², the corner θ ≥ margin held out.

    A random ``val_fraction`` of the observed combinations (seeded) is the in-distribution validation set.
    """
    if not 0 < margin < extent:
        raise ValueError(f"margin must lie in (0, extent={extent}), got {margin}")
    axis = torch.linspace(-extent, extent, n_grid, dtype=torch.float64)
    theta = torch.cartesian_prod(axis, axis)
    sensors = fibonacci_sensors(n_sensors)
    y = observe(theta, sensors, kappa)
    held = (theta >= margin).all(dim=1)
    observed = (~held).nonzero().squeeze(1)
    order = observed[torch.randperm(len(observed), generator=torch.Generator().manual_seed(seed))]
    n_val = round(val_fraction * len(order))
    val, train = order[:n_val].sort().values, order[n_val:].sort().values
    theta = theta.float()
    return SymmetricSpaceData(
        train=(y[train], theta[train]),
        val=(y[val], theta[val]),
        heldout=(y[held], theta[held]),
        sensors=sensors,
        kappa=kappa,
        extent=extent,
        margin=margin,
    )
