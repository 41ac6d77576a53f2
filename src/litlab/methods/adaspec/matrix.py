"""Graph matrices as sparse operators: the base models' normalized adjacency and AdaSpec's Ω.

Every matrix here is symmetric with A's sparsity plus a diagonal, ``S = W + diag(c)``; propagation is one
sparse product, so a K-step filter costs O(K·|E|·h) whichever matrix it runs on.

- ``Ω_D = (D+B)^-½ (A+B) (D+B)^-½`` with ``B = diag(b)``, ``b ≥ 0`` learnable per node. Its spectrum lies
  in [−1, 1] for every b ≥ 0 (a normalized weighted adjacency); b = 1 gives GCN's Ã with self-loops and
  b = 0 the one without.
- ``Ω_F = Σ_i (X_:i X_:iᵀ / ‖X_:i‖²) ∘ A``: edge (u, v) weighted by ``Σ_i x_ui x_vi / ‖X_:i‖²``, zero
  columns skipped; fixed, computed once in O(h·|E|).
- ``Ω = Ω_D + α1·I + α2·Ω_F``.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
import torch
from scipy.sparse import coo_matrix
from scipy.sparse.linalg import ArpackNoConvergence, eigsh
from torch import nn
from torch.nn import functional as F

from litlab.core.errors import LitlabError
from litlab.datamodules.graphs import simple_undirected

BInit = Literal["degree", "n"]
Rescale = Literal["radius", "none"]


class SparseOperator:
    """``S = W + diag(c)`` with off-diagonal ``W`` on ``edge_index (2, E)`` (``W[row, col] = weight``).

    ``S(x)`` returns ``S @ x`` for ``x: (n, h)`` by gather and scatter-add, with gradients to ``weight``,
    ``diagonal`` and ``x`` (on a CPU this beats torch.sparse, whose backward to the values is slow).
    """

    def __init__(self, edge_index: torch.Tensor, weight: torch.Tensor, diagonal: torch.Tensor) -> None:
        self.edge_index, self.weight, self.diagonal = edge_index, weight, diagonal

    @property
    def num_nodes(self) -> int:
        return self.diagonal.numel()

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        row, col = self.edge_index
        messages = x.index_select(0, col) * self.weight.unsqueeze(-1)
        # A contiguous output: index_add_ into a strided view is an order of magnitude slower on CPUs.
        return x.new_zeros(x.shape).index_add_(0, row, messages) + self.diagonal.unsqueeze(-1) * x

    def to_dense(self) -> torch.Tensor:
        """``(n, n)`` dense matrix (tests and small analyses only)."""
        n = self.num_nodes
        dense = torch.zeros(n, n, dtype=self.weight.dtype, device=self.weight.device)
        dense.index_put_(tuple(self.edge_index), self.weight, accumulate=True)
        return dense + torch.diag(self.diagonal)


def node_degree(edge_index: torch.Tensor, num_nodes: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Degrees ``(n,)`` of a symmetric edge list ``(2, E)``."""
    return torch.bincount(edge_index[0], minlength=num_nodes).to(dtype)


def omega_d(
    edge_index: torch.Tensor, degree: torch.Tensor, b: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Ω_D = (D+B)^-½ (A+B) (D+B)^-½ as ``(edge weights (E,), diagonal (n,))``.

    A node with ``d + b = 0`` (isolated, b = 0) gets a zero row instead of a division by zero.
    """
    total = degree + b
    inv_sqrt = torch.where(total > 0, total.clamp_min(1e-30).rsqrt(), torch.zeros_like(total))
    return inv_sqrt[edge_index[0]] * inv_sqrt[edge_index[1]], b * inv_sqrt.square()


def feature_edge_weights(
    x: torch.Tensor, edge_index: torch.Tensor, chunk_elements: int = 1 << 22
) -> torch.Tensor:
    """Ω_F on A's edges: ``w_uv = Σ_i x_ui·x_vi / ‖X_:i‖²`` -> ``(E,)``; all-zero columns are skipped.

    Edges are processed in chunks so memory stays at ``chunk_elements`` floats, not ``E·h``.
    """
    norm2 = x.square().sum(dim=0)
    scaled = x * torch.where(norm2 > 0, norm2.clamp_min(1e-30).rsqrt(), torch.zeros_like(norm2))
    step = max(1, chunk_elements // max(1, x.size(1)))
    row, col = edge_index
    parts = [
        (scaled[row[i : i + step]] * scaled[col[i : i + step]]).sum(dim=1)
        for i in range(0, row.numel(), step)
    ]
    return torch.cat(parts) if parts else x.new_zeros(0)


def initial_b(degree: torch.Tensor, scheme: BInit = "degree") -> torch.Tensor:
    """AdaSpec's initial b: ``1/D_uu`` (Section 5.1; isolated nodes get 1) or ``1/n`` (the appendix)."""
    if scheme == "degree":
        return torch.where(degree > 0, 1.0 / degree.clamp_min(1.0), torch.ones_like(degree))
    if scheme == "n":
        return torch.full_like(degree, 1.0 / degree.numel())
    raise ValueError(f"b_init must be 'degree' or 'n', got {scheme!r}")


def omega(
    edge_index: torch.Tensor,
    degree: torch.Tensor,
    b: torch.Tensor,
    feature_weight: torch.Tensor,
    alpha1: float,
    alpha2: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Ω = Ω_D + α1·I + α2·Ω_F as ``(edge weights (E,), diagonal (n,))``."""
    weight, diagonal = omega_d(edge_index, degree, b)
    return weight + alpha2 * feature_weight, diagonal + alpha1


def symmetric_spectral_radius(edge_index: torch.Tensor, weight: torch.Tensor, num_nodes: int) -> float:
    """ρ of the symmetric matrix with ``weight`` on ``edge_index`` (zero diagonal): dense for small n,
    Lanczos (ARPACK, largest magnitude) otherwise, with the Gershgorin row-sum bound as a fallback."""
    if weight.numel() == 0:
        return 0.0
    row, col = edge_index.cpu().numpy()
    values = weight.detach().double().cpu().numpy()
    matrix = coo_matrix((values, (row, col)), shape=(num_nodes, num_nodes)).tocsr()
    if num_nodes <= 256:  # torch's eigvalsh keeps to torch's thread count (numpy's BLAS may not)
        return float(torch.linalg.eigvalsh(torch.from_numpy(matrix.toarray())).abs().max())
    try:
        largest = eigsh(matrix, k=1, which="LM", v0=np.ones(num_nodes), tol=1e-8, return_eigenvectors=False)
        return float(np.abs(largest).max()) * (1 + 1e-6)
    except ArpackNoConvergence:
        return float(np.abs(matrix).sum(axis=1).max())


def spectral_radius_bound(
    feature_weight: torch.Tensor, edge_index: torch.Tensor, num_nodes: int, alpha1: float, alpha2: float
) -> float:
    """``|α1| + 1 + |α2|·ρ(Ω_F)`` ≥ ρ(Ω) for every b ≥ 0 (ρ(Ω_D) ≤ 1 and Weyl's inequality)."""
    return abs(alpha1) + 1.0 + abs(alpha2) * symmetric_spectral_radius(edge_index, feature_weight, num_nodes)


def softplus_inverse(y: torch.Tensor) -> torch.Tensor:
    """β with softplus(β) = y for y > 0 (stable for small and large y)."""
    return y + torch.log(-torch.expm1(-y))


class NativeMatrix(nn.Module):
    """A base model's own matrix: Ã = (D+cI)^-½ (A+cI) (D+cI)^-½ with c = 1 (``self_loops``) or 0.

    ``edge_index: (2, E)`` is made simple and undirected first. Calling the module returns a
    ``SparseOperator`` with spectrum in [−1, 1]; weights are formed from the degrees in the module's dtype.
    """

    def __init__(self, edge_index: torch.Tensor, num_nodes: int, self_loops: bool) -> None:
        super().__init__()
        edge_index = simple_undirected(edge_index, num_nodes)
        degree = node_degree(edge_index, num_nodes)
        self.register_buffer("edge_index", edge_index, persistent=False)
        self.register_buffer("degree", degree, persistent=False)
        self.register_buffer("loops", torch.full_like(degree, float(self_loops)), persistent=False)

    def forward(self) -> SparseOperator:
        # The weights are fixed: compute them once per dtype and device (e.g. after .double()).
        key = (self.degree.dtype, self.degree.device)
        if getattr(self, "_cached_key", None) != key:
            self._cached = omega_d(self.edge_index, self.degree, self.loops)
            self._cached_key = key
        return SparseOperator(self.edge_index, *self._cached)


class AdaSpecMatrix(nn.Module):
    """AdaSpec's adaptive matrix Ω = Ω_D + α1·I + α2·Ω_F, divided by a spectral-radius bound.

    ``b = softplus(β)`` (so b > 0, which the paper's b ≥ 0 allows and which keeps isolated nodes finite),
    initialised at ``initial_b(degree, b_init)``. ``rescale='radius'`` divides Ω by
    ``ρ = |α1| + 1 + |α2|·ρ(Ω_F)`` (Ω_F is fixed, so ρ(Ω_F) is computed once), which puts the spectrum
    in [−1, 1] for every b, the domain of the Chebyshev, Jacobi and Bernstein bases, and keeps the α1
    shift (a centring map would cancel it); ``rescale='none'`` uses Ω as the paper writes it.

    Args:
        edge_index: ``(2, E)`` graph (made simple and undirected).
        features: ``(n, h)`` node features for Ω_F (the model's input features; dense or sparse COO).
        alpha1, alpha2: the shift and the feature-term weight.
        b_init: ``degree`` (1/D_uu, Section 5.1) or ``n`` (1/n, the appendix).
        rescale: ``radius`` or ``none``.
        learn_b: train b (the paper) or keep it at its initial value (ablation).
        feature_term: include α2·Ω_F (the paper) or drop it, Ω = Ω_D + α1·I (ablation; the radius bound
            then is |α1| + 1).
    """

    def __init__(
        self,
        edge_index: torch.Tensor,
        features: torch.Tensor,
        alpha1: float = 0.0,
        alpha2: float = 0.1,
        b_init: BInit = "degree",
        rescale: Rescale = "radius",
        learn_b: bool = True,
        feature_term: bool = True,
    ) -> None:
        super().__init__()
        if rescale not in ("radius", "none"):
            raise LitlabError(f"model.network.matrix.rescale must be 'radius' or 'none', got {rescale!r}")
        if b_init not in ("degree", "n"):
            raise LitlabError(f"model.network.matrix.b_init must be 'degree' or 'n', got {b_init!r}")
        num_nodes = features.size(0)
        edge_index = simple_undirected(edge_index, num_nodes)
        degree = node_degree(edge_index, num_nodes, features.dtype)
        if feature_term:
            dense = features.to_dense() if features.is_sparse else features
            feature_weight = feature_edge_weights(dense, edge_index)
        else:
            feature_weight = torch.zeros(edge_index.size(1), dtype=features.dtype, device=features.device)
        self.alpha1, self.alpha2, self.b_init = float(alpha1), float(alpha2) if feature_term else 0.0, b_init
        radius = spectral_radius_bound(feature_weight, edge_index, num_nodes, self.alpha1, self.alpha2)
        self.scale = 1.0 / radius if rescale == "radius" else 1.0
        self.register_buffer("edge_index", edge_index, persistent=False)
        self.register_buffer("degree", degree, persistent=False)
        self.register_buffer("feature_weight", feature_weight, persistent=False)
        self.b_raw = nn.Parameter(softplus_inverse(initial_b(degree, b_init)), requires_grad=learn_b)

    @property
    def b(self) -> torch.Tensor:
        """The per-node b ``(n,)``, b > 0."""
        return F.softplus(self.b_raw)

    def forward(self) -> SparseOperator:
        # Ω·scale in few fused steps; b > 0 keeps D + B > 0 (the clamp only guards float underflow of b).
        b = self.b
        inv_sqrt = (self.degree + b).clamp_min(1e-30).rsqrt() * self.scale**0.5
        row, col = self.edge_index
        weight = inv_sqrt.index_select(0, row) * inv_sqrt.index_select(0, col)  # backward: index_add
        weight = weight + (self.alpha2 * self.scale) * self.feature_weight
        diagonal = b * inv_sqrt.square() + self.alpha1 * self.scale
        return SparseOperator(self.edge_index, weight, diagonal)

    def extra_repr(self) -> str:
        return f"alpha1={self.alpha1}, alpha2={self.alpha2}, scale={self.scale:.4g}, n={self.degree.numel()}"
