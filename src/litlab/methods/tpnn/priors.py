"""Priors and proposal laws of Bayesian-TPNN: the number of nodes, their subsets and their parameters.

- pi(K = k) ∝ exp(-C0 k log n) for k <= K_max (the cap makes the prior proper; ratios never see it).
- Subset sizes, BART-style: w_d ∝ (1 - p_add(d)) prod_{l<d} p_add(l), p_add(l) = alpha (1 + l)^(-gamma),
  d = 1..D (truncated at the largest order D), and S | d uniform over the C(p, d) subsets of size d.
- Location b ~ U(0, 1) (inputs are scaled to [0, 1]); temperature gamma ~ Gamma(a, rate), carried as
  l = log gamma, so its density there is Gamma(e^l) e^l.

Proposals draw variables with weights ``p_input`` (importance from a boosting model, or uniform): a
subset of size d is drawn with probability ∝ prod_{j in S} p_j among the subsets of size d
(conditional Poisson sampling), normalised by the elementary symmetric polynomial e_d(p).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol

import torch


def size_weights(max_order: int, n_vars: int, alpha: float, gamma: float) -> torch.Tensor:
    """w_d for d = 1..min(D, p): (d_max,), normalised; w[d-1] is the weight of order d."""
    d_max = min(max_order, n_vars)
    orders = torch.arange(1, d_max + 1, dtype=torch.float64)
    p_add = alpha * (1 + orders) ** (-gamma)
    grow = torch.cat([torch.ones(1, dtype=torch.float64), torch.cumprod(p_add, 0)[:-1]])
    weights = (1 - p_add) * grow
    weights[-1] = grow[-1]  # the cap: a subset of the largest order stops growing
    return weights / weights.sum()


def log_subset_prior(sizes: torch.Tensor, log_weights: torch.Tensor, n_vars: int) -> torch.Tensor:
    """log pi(S) = log w_|S| - log C(p, |S|) for subsets of the given sizes (any shape)."""
    d = sizes.to(torch.float64)
    log_binom = torch.lgamma(torch.tensor(n_vars + 1.0)) - torch.lgamma(d + 1) - torch.lgamma(n_vars - d + 1)
    return log_weights[(sizes - 1).clamp_min(0)] - log_binom


def elementary_symmetric(weights: torch.Tensor, max_order: int) -> torch.Tensor:
    """e_0..e_D of ``weights: (p,)`` by the recursion e_d <- e_d + w_j e_{d-1}: (D + 1,)."""
    e = torch.zeros(max_order + 1, dtype=torch.float64)
    e[0] = 1.0
    for w in weights.tolist():  # p steps, each a vector update over the orders
        e[1:] = e[1:] + w * e[:-1].clone()
    return e


def tail_symmetric(weights: torch.Tensor, max_order: int) -> torch.Tensor:
    """E[j, d] = e_d(weights[j:]) for j = 0..p: (p + 1, D + 1) (the tables of sequential sampling)."""
    p = len(weights)
    table = torch.zeros(p + 1, max_order + 1, dtype=torch.float64)
    table[p, 0] = 1.0
    for j in range(p - 1, -1, -1):
        table[j] = table[j + 1]
        table[j, 1:] += weights[j] * table[j + 1, :-1]
    return table


@dataclass(frozen=True)
class VariableLaw:
    """Draws subsets with probability ∝ prod p_j among subsets of one size; p_j > 0 for every input."""

    weights: torch.Tensor  # (p,) float64, sums to 1
    max_order: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "tail", tail_symmetric(self.weights, self.max_order))
        object.__setattr__(self, "log_weights", self.weights.log())

    def log_prob_subset(self, mask: torch.Tensor) -> torch.Tensor:
        """log P(S | |S|) = sum_{j in S} log p_j - log e_|S|(p) for ``mask: (..., p)`` bool."""
        size = mask.sum(-1)
        return (mask * self.log_weights).sum(-1) - self.tail[0, size].log()

    def sample_subset(self, size: int, generator: torch.Generator) -> torch.Tensor:
        """A subset of ``size`` inputs (sorted long tensor), sequentially: j is taken with probability
        p_j e_{r-1}(p_{j+1:}) / e_r(p_{j:}) where r inputs remain to be taken."""
        uniforms = torch.rand(len(self.weights), generator=generator, dtype=torch.float64).tolist()
        chosen, remaining = [], size
        for j, u in enumerate(uniforms):
            if remaining == 0:
                break
            take = self.weights[j] * self.tail[j + 1, remaining - 1] / self.tail[j, remaining]
            if u < take:
                chosen.append(j)
                remaining -= 1
        return torch.tensor(chosen, dtype=torch.long)

    def log_prob_one(self, j: torch.Tensor, excluded: torch.Tensor) -> torch.Tensor:
        """log p_j / sum_{l not in excluded} p_l (one variable outside a subset); ``excluded: (..., p)``."""
        free = (self.weights * ~excluded).sum(-1)
        return self.log_weights[j] - free.log()

    def sample_one(self, excluded: torch.Tensor, generator: torch.Generator) -> int:
        """One variable outside ``excluded: (p,)`` bool, with probability ∝ p_j."""
        return int(torch.multinomial(self.weights * ~excluded, 1, generator=generator))


class ParameterLaw(Protocol):
    """A law of one edge's (b, log gamma): a prior or a proposal (a density, or a pmf in tests)."""

    def sample(
        self, shape: tuple[int, ...], generator: torch.Generator
    ) -> tuple[torch.Tensor, torch.Tensor]: ...

    def log_prob(self, b: torch.Tensor, log_gamma: torch.Tensor) -> torch.Tensor: ...


class CopyKernel(Protocol):
    """How a Stepwise birth copies a parent's (b, log gamma) for the variables the two nodes share."""

    def sample(
        self, b: torch.Tensor, log_gamma: torch.Tensor, generator: torch.Generator
    ) -> tuple[torch.Tensor, torch.Tensor]: ...

    def log_prob(
        self, b: torch.Tensor, log_gamma: torch.Tensor, b_parent: torch.Tensor, lg_parent: torch.Tensor
    ) -> torch.Tensor: ...


@dataclass(frozen=True)
class EdgePrior:
    """b ~ U(0, 1) and the sharpness 1/gamma ~ Gamma(shape, rate), as a density of (b, l = log gamma).

    The notes give gamma ~ Gamma(1, 0.01) for sigmoid((x - b) / gamma); read as a rate on the temperature
    gamma it would have mean 100 and make every factor linear on [0, 1], so it is read here as a prior
    on the sharpness 1/gamma (mean 100, i.e. mostly step-like factors, as in ANOVA-TPNN) [reconstruction].
    In l: log p(l) = a log r - lgamma(a) - a l - r e^(-l).
    """

    shape: float = 1.0
    rate: float = 0.01

    def sample(self, shape: tuple[int, ...], generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        b = torch.rand(shape, generator=generator, dtype=torch.float64)
        sharpness = torch._standard_gamma(
            torch.full(shape, self.shape, dtype=torch.float64), generator=generator
        )
        return b, -(sharpness / self.rate).log()

    def log_prob(self, b: torch.Tensor, log_gamma: torch.Tensor) -> torch.Tensor:
        inside = (b >= 0) & (b <= 1)
        density = (
            self.shape * math.log(self.rate)
            - math.lgamma(self.shape)
            - self.shape * log_gamma
            - self.rate * torch.exp(-log_gamma)
        )
        return torch.where(inside, density, torch.full_like(density, -math.inf))


@dataclass(frozen=True)
class EdgeProposal:
    """Where dimension-changing moves draw a new edge: b ~ U(0, 1), log gamma ~ N(mean, std^2)."""

    log_gamma_mean: float = math.log(0.1)
    log_gamma_std: float = 1.5

    def sample(self, shape: tuple[int, ...], generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        b = torch.rand(shape, generator=generator, dtype=torch.float64)
        z = torch.randn(shape, generator=generator, dtype=torch.float64)
        return b, self.log_gamma_mean + self.log_gamma_std * z

    def log_prob(self, b: torch.Tensor, log_gamma: torch.Tensor) -> torch.Tensor:
        inside = (b >= 0) & (b <= 1)
        z = (log_gamma - self.log_gamma_mean) / self.log_gamma_std
        density = -0.5 * z**2 - math.log(self.log_gamma_std) - 0.5 * math.log(2 * math.pi)
        return torch.where(inside, density, torch.full_like(density, -math.inf))


@dataclass(frozen=True)
class GaussianCopy:
    """Copy a parent's parameters with Gaussian jitter (std ``b_std`` on b, ``log_gamma_std`` on l)."""

    b_std: float = 0.05
    log_gamma_std: float = 0.2

    def sample(
        self, b: torch.Tensor, log_gamma: torch.Tensor, generator: torch.Generator
    ) -> tuple[torch.Tensor, torch.Tensor]:
        noise = torch.randn((2, *b.shape), generator=generator, dtype=torch.float64)
        return b + self.b_std * noise[0], log_gamma + self.log_gamma_std * noise[1]

    def log_prob(
        self, b: torch.Tensor, log_gamma: torch.Tensor, b_parent: torch.Tensor, lg_parent: torch.Tensor
    ) -> torch.Tensor:
        zb = (b - b_parent) / self.b_std
        zl = (log_gamma - lg_parent) / self.log_gamma_std
        return -0.5 * (zb**2 + zl**2) - math.log(self.b_std * self.log_gamma_std * 2 * math.pi)


def log_node_count_prior(k: torch.Tensor | int, c0: float, n: int) -> torch.Tensor | float:
    """log pi(K = k) up to a constant: -C0 k log n."""
    return -c0 * k * math.log(n)
