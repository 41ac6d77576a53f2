"""The contextual stochastic block model of GPRGNN (Chien et al. 2021), vectorised, plus a "twins" variant.

Two balanced classes ``v ∈ {+1, −1}``. An edge joins ``i < j`` with probability ``(d + √d·Λ)/n`` in a
class and ``(d − √d·Λ)/n`` across; features are ``x_i = √(μ/n)·v_i·u + z_i/√p`` with ``u ~ N(0, I/p)``
and ``z_i ~ N(0, I)``. ``φ ∈ [−1, 1]`` trades graph for feature information:
``Λ = √(1+ε)·sin(φπ/2)``, ``μ = √(γ(1+ε))·cos(φπ/2)``, ``γ = n/p``; φ < 0 is heterophilous.

Twins (our addition, for AdaSpec's distinguishability argument): a fraction of nodes gets a copy with the
same neighbours and label but freshly drawn features. Twins are structurally identical, so any matrix
built from the graph alone gives them repeated eigenvalues; only features can separate them.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch_geometric.data import Data

from litlab.datamodules.graphs import NodeDataModule, random_class_split, simple_undirected


def csbm_parameters(phi: float, n: int, p: int, epsilon: float) -> tuple[float, float]:
    """``(Λ, μ)`` of the cSBM for graph/feature trade-off ``phi`` (GPRGNN's parameterisation)."""
    if not -1.0 <= phi <= 1.0:
        raise ValueError(f"phi must lie in [-1, 1], got {phi}")
    gamma = n / p
    lam = math.sqrt(1 + epsilon) * math.sin(phi * math.pi / 2)
    mu = math.sqrt(gamma * (1 + epsilon)) * math.cos(phi * math.pi / 2)
    return lam, mu


def upper_pairs(m: int, k: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Row-major index ``k`` into the strict upper triangle of an ``m × m`` matrix -> ``(i, j)``, i < j."""
    k = k.astype(np.int64)
    i = m - 2 - np.floor(np.sqrt(-8.0 * k + 4.0 * m * (m - 1) - 7) / 2.0 - 0.5).astype(np.int64)
    start = i * (2 * m - i - 1) // 2  # index of (i, i+1)
    # Float rounding can be off by one near row boundaries; correct exactly in integers.
    low = k < start
    i = np.where(low, i - 1, i)
    start = i * (2 * m - i - 1) // 2
    high = k >= start + (m - 1 - i)
    i = np.where(high, i + 1, i)
    start = i * (2 * m - i - 1) // 2
    return i, k - start + i + 1


def _sample_block(rng: np.random.Generator, size: int, prob: float) -> np.ndarray:
    """Indices of the successes among ``size`` independent Bernoulli(prob) trials, exactly."""
    count = rng.binomial(size, min(max(prob, 0.0), 1.0)) if size > 0 else 0
    return rng.choice(size, size=count, replace=False) if count else np.zeros(0, dtype=np.int64)


def csbm(
    n: int,
    p: int,
    d: float = 5.0,
    epsilon: float = 3.25,
    phi: float = 0.0,
    seed: int = 0,
    twins_fraction: float = 0.0,
) -> Data:
    """A cSBM graph: ``x (n', p)``, ``y (n',)`` in {0, 1}, undirected ``edge_index`` and ``twin_of (n',)``
    (the original of each twin, −1 for other nodes); ``n' = n + round(twins_fraction·n)``."""
    rng = np.random.default_rng(seed)
    lam, mu = csbm_parameters(phi, n, p, epsilon)
    p_in, p_out = (d + math.sqrt(d) * lam) / n, (d - math.sqrt(d) * lam) / n
    sign = np.where(np.arange(n) < n // 2, 1.0, -1.0)
    first, second = np.arange(n // 2), np.arange(n // 2, n)
    edges = []
    for block in (first, second):
        m = len(block)
        i, j = upper_pairs(m, _sample_block(rng, m * (m - 1) // 2, p_in))
        edges.append(np.stack([block[i], block[j]]))
    cross = _sample_block(rng, len(first) * len(second), p_out)
    edges.append(np.stack([first[cross // len(second)], second[cross % len(second)]]))
    edge_index = np.concatenate(edges, axis=1)
    u = rng.normal(0.0, 1.0 / math.sqrt(p), size=p)

    def features(signs: np.ndarray) -> np.ndarray:
        noise = rng.normal(0.0, 1.0, size=(len(signs), p))
        return math.sqrt(mu / n) * signs[:, None] * u[None, :] + noise / math.sqrt(p)

    x = features(sign)
    twin_of = np.full(n, -1, dtype=np.int64)
    n_twins = round(twins_fraction * n)
    if n_twins:
        originals = rng.choice(n, size=n_twins, replace=False)
        twin_id = np.full(n, -1, dtype=np.int64)
        twin_id[originals] = n + np.arange(n_twins)
        both = np.concatenate([edge_index, edge_index[::-1]], axis=1)
        copied = both[:, twin_id[both[0]] >= 0]
        edge_index = np.concatenate([edge_index, np.stack([twin_id[copied[0]], copied[1]])], axis=1)
        x = np.concatenate([x, features(sign[originals])])
        sign = np.concatenate([sign, sign[originals]])
        twin_of = np.concatenate([twin_of, originals])
    num_nodes = len(sign)
    return Data(
        x=torch.from_numpy(x).float(),
        y=torch.from_numpy((sign < 0).astype(np.int64)),
        edge_index=simple_undirected(torch.from_numpy(edge_index).long(), num_nodes),
        twin_of=torch.from_numpy(twin_of),
        num_nodes=num_nodes,
    )


class CSBMDataModule(NodeDataModule):
    """A cSBM graph (``graph_seed``) with the random class split (``seed``), e.g. AdaSpec's 2.5/2.5/95."""

    def __init__(
        self,
        n: int = 2000,
        p: int = 500,
        d: float = 5.0,
        epsilon: float = 3.25,
        phi: float = -0.5,
        twins_fraction: float = 0.0,
        graph_seed: int = 0,
        train_rate: float = 0.025,
        val_rate: float = 0.025,
        seed: int = 0,
        num_workers: int = 0,
    ) -> None:
        super().__init__(num_workers)
        self.graph_kwargs = dict(n=n, p=p, d=d, epsilon=epsilon, phi=phi, twins_fraction=twins_fraction)
        self.graph_seed = graph_seed
        self.train_rate, self.val_rate, self.seed = train_rate, val_rate, seed

    def setup(self, stage: str | None = None) -> None:
        if self.graph is None:
            graph = csbm(**self.graph_kwargs, seed=self.graph_seed)
            graph.train_mask, graph.val_mask, graph.test_mask = random_class_split(
                graph.y, self.train_rate, self.val_rate, self.seed
            )
            self.graph = graph
