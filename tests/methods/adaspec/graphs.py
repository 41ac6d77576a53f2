"""Small random graphs shared by the AdaSpec tests (seeded, with planted structural twins)."""

from __future__ import annotations

import torch
from torch_geometric.utils import erdos_renyi_graph

from litlab.datamodules.graphs import simple_undirected


def random_graph(
    n: int = 24, p: float = 0.15, twins: int = 3, isolated: int = 1, seed: int = 0
) -> torch.Tensor:
    """An Erdős–Rényi graph on ``n`` nodes plus ``twins`` leaves hanging off node 0 (structurally identical,
    so Ã has repeated eigenvalues) and ``isolated`` isolated nodes, as a simple undirected ``(2, E)``."""
    torch.manual_seed(seed)
    edges = erdos_renyi_graph(n, p)
    leaves = torch.arange(n, n + twins)
    star = torch.stack([torch.zeros_like(leaves), leaves])
    return simple_undirected(torch.cat([edges, star], dim=1), n + twins + isolated)


def dense_adjacency(edge_index: torch.Tensor, n: int) -> torch.Tensor:
    """``(n, n)`` float64 0/1 adjacency."""
    adjacency = torch.zeros(n, n, dtype=torch.float64)
    adjacency[edge_index[0], edge_index[1]] = 1.0
    return adjacency
