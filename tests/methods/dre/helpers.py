"""Small seeded density-ratio problems shared by the dre tests."""

from __future__ import annotations

import torch

from litlab.datamodules.density_ratio import GaussianMixturePair


def samples(
    n_p: int, n_q: int, dim: int = 2, seed: int = 0, separation: float = 1.0
) -> tuple[torch.Tensor, ...]:
    """(x_p, x_q) float64 draws of a 3-component mixture pair."""
    pair = GaussianMixturePair(dim, 3, separation)
    generator = torch.Generator().manual_seed(seed)
    return pair.sample_p(n_p, generator), pair.sample_q(n_q, generator)


def grid_axes(sigmas: list[float], lams: list[float]) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.tensor(sigmas, dtype=torch.float64), torch.tensor(lams, dtype=torch.float64)
