"""A tiny discrete Bayesian-TPNN posterior whose every state can be enumerated (p = 3, D = 2, K_max = 2).

Edge parameters live on a two-point grid (prior and proposal are pmfs there) and a Stepwise birth copies
its parent's parameters exactly, so the node set is finite (18 nodes, 190 node multisets) and each move's
transition probabilities can be listed. A multiset s of K nodes has target mass
pi(s) = p(y | s) pi(K) (K! / prod m!) prod pi(v) (the m's are the multiplicities).
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from itertools import combinations, combinations_with_replacement, product

import torch

from litlab.methods.tpnn.posterior import Node, TPNNPosterior
from litlab.methods.tpnn.sampler import ChainState, Sampler

GRID = ((0.3, math.log(0.2)), (0.7, math.log(0.5)))


@dataclass(frozen=True)
class GridLaw:
    """A pmf on the points of ``GRID`` with the given weights."""

    weights: tuple[float, ...]

    def sample(self, shape: tuple[int, ...], generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        index = torch.multinomial(torch.tensor(self.weights), math.prod(shape), True, generator=generator)
        points = torch.tensor(GRID, dtype=torch.float64)[index].reshape(*shape, 2)
        return points[..., 0], points[..., 1]

    def log_prob(self, b: torch.Tensor, log_gamma: torch.Tensor) -> torch.Tensor:
        out = torch.full(b.shape, -math.inf, dtype=torch.float64)
        for (gb, gl), w in zip(GRID, self.weights, strict=True):
            hit = torch.isclose(b, torch.tensor(gb, dtype=torch.float64)) & torch.isclose(
                log_gamma, torch.tensor(gl, dtype=torch.float64)
            )
            out = torch.where(hit, math.log(w), out)
        return out


class ExactCopy:
    """A Stepwise birth keeps the parent's parameters: a point mass."""

    def sample(self, b: torch.Tensor, log_gamma: torch.Tensor, generator: torch.Generator):
        return b.clone(), log_gamma.clone()

    def log_prob(self, b, log_gamma, b_parent, lg_parent) -> torch.Tensor:
        same = torch.isclose(b, b_parent) & torch.isclose(log_gamma, lg_parent)
        return torch.where(same, 0.0, -math.inf)


def tiny_posterior(**switches) -> TPNNPosterior:
    generator = torch.Generator().manual_seed(3)
    x = torch.rand(12, 3, generator=generator, dtype=torch.float64)
    y = torch.sin(3 * x[:, 0]) * (x[:, 1] > 0.5) + 0.1 * torch.randn(
        12, generator=generator, dtype=torch.float64
    )
    y = y - y.mean()
    return TPNNPosterior(
        x,
        y,
        torch.tensor([0.5, 0.3, 0.2]),
        GridLaw((0.6, 0.4)),
        GridLaw((0.45, 0.55)),
        ExactCopy(),
        max_nodes=2,
        max_order=2,
        c0=0.3,
        p_add_alpha=0.6,
        p_add_gamma=1.0,
        beta_var=1.0,
        random_birth_mass=1.5,
        **switches,
    )


def all_nodes(p: int = 3, max_order: int = 2) -> list[Node]:
    nodes = []
    for size in range(1, max_order + 1):
        for subset in combinations(range(p), size):
            for params in product(GRID, repeat=size):
                nodes.append(
                    Node.make(list(subset), [b for b, _ in params], [g for _, g in params], max_order, p)
                )
    return nodes


def all_states(nodes: list[Node], max_nodes: int = 2) -> list[tuple[int, ...]]:
    """Multisets of node indices, as sorted tuples."""
    return [s for k in range(max_nodes + 1) for s in combinations_with_replacement(range(len(nodes)), k)]


def make_state(sampler: Sampler, nodes: list[Node], multiset: tuple[int, ...], sigma2: float) -> ChainState:
    state = sampler.initial_state(0, sigma2)
    for slot, index in enumerate(multiset):
        sampler._commit(state, sampler.candidate(state, slot, nodes[index]))
    return state


def log_target(sampler: Sampler, nodes: list[Node], multiset: tuple[int, ...], sigma2: float) -> float:
    """log pi(s) of the multiset (module docstring)."""
    post = sampler.post
    state = make_state(sampler, nodes, multiset, sigma2)
    prior = sum(float(post.node_log_prior(nodes[i].vars, nodes[i].b, nodes[i].log_gamma)) for i in multiset)
    multiplicity = math.lgamma(len(multiset) + 1) - sum(
        math.lgamma(m + 1) for m in Counter(multiset).values()
    )
    return state.log_ml + post.log_count_prior(len(multiset)) + prior + multiplicity
