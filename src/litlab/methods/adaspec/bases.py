"""The five base spectral GNNs, each a K-step sparse recurrence on a propagation operator.

Every base takes ``propagate``: ``v -> S v`` for a symmetric ``S`` with spectrum in [−1, 1] (the native
normalized adjacency Ã, or AdaSpec's rescaled Ω) and maps it to its own domain as its paper does:
ChebNet and ChebNetII use ``L̂ − I = −S``; GPRGNN and JacobiConv use ``S``; BernNet uses ``L̂ = I − S``.
``self_loops`` says which Ã the base uses natively (GPRGNN: with self-loops; the others: without).

Decoupled bases (all but ChebNet) compute ``g_Θ(S)·f_W(X)`` with a two-layer MLP ``f_W`` (dropout on
input and hidden units, then ``dprate`` dropout before propagation, as in GPRGNN and BernNet).

Input features may be a sparse COO tensor (bag-of-words sets): dropout then touches only the stored
entries, which gives the same distribution as dense dropout (a zero stays zero) at a fraction of the cost.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator

import torch
from torch import nn
from torch.nn import functional as F

Propagate = Callable[[torch.Tensor], torch.Tensor]


def feature_dropout(x: torch.Tensor, p: float, training: bool) -> torch.Tensor:
    """Dropout on dense or sparse COO ``x (n, h)``; for sparse x only the stored entries are sampled."""
    if not x.is_sparse:
        return F.dropout(x, p, training)
    if not training or p == 0:
        return x
    x = x.coalesce()
    values = F.dropout(x.values(), p, training)
    return torch.sparse_coo_tensor(x.indices(), values, x.shape, is_coalesced=True, check_invariants=False)


def project(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """``x @ weight`` for dense or sparse COO ``x (n, h)`` and ``weight (h, m)``."""
    return torch.sparse.mm(x, weight) if x.is_sparse else x @ weight


def chebyshev_terms(x: torch.Tensor, apply: Propagate, K: int) -> Iterator[torch.Tensor]:
    """``T_0(M)x, …, T_K(M)x`` by ``T_{k+1} = 2M·T_k − T_{k−1}``, with ``apply: v -> M v``."""
    previous, current = x, x
    yield x
    for k in range(1, K + 1):
        previous, current = current, (apply(current) if k == 1 else 2 * apply(current) - previous)
        yield current


def chebyshev_nodes(K: int) -> torch.Tensor:
    """The K+1 Chebyshev nodes ``x_j = cos((j + ½)π/(K+1))``, ``j = 0..K``."""
    return torch.cos((torch.arange(K + 1, dtype=torch.float64) + 0.5) * math.pi / (K + 1))


def chebyshev_matrix(points: torch.Tensor, K: int) -> torch.Tensor:
    """``T_k(points_j)`` as a ``(K+1, len(points))`` matrix (row k = degree k)."""
    rows = [torch.ones_like(points), points]
    for _ in range(2, K + 1):
        rows.append(2 * points * rows[-1] - rows[-2])
    return torch.stack(rows[: K + 1])


def jacobi_recurrence(k: int, a: float, b: float) -> tuple[float, float, float]:
    """``(A_k, B_k, C_k)`` of the Jacobi recurrence ``P_k = (A_k x + B_k) P_{k−1} − C_k P_{k−2}``."""
    if k == 1:
        return (a + b + 2) / 2, (a - b) / 2, 0.0
    s = 2 * k + a + b
    denominator = 2 * k * (k + a + b) * (s - 2)
    return (
        (s - 1) * s * (s - 2) / denominator,
        (s - 1) * (a * a - b * b) / denominator,
        2 * (k + a - 1) * (k + b - 1) * s / denominator,
    )


def chebyshev_series(terms: torch.Tensor, apply: Propagate) -> torch.Tensor:
    """``Σ_k T_k(M) y_k`` for ``terms (K+1, n, h)`` by Clenshaw's recurrence (K products with M)."""
    following = torch.zeros_like(terms[0])
    current = torch.zeros_like(terms[0])
    for k in range(terms.size(0) - 1, 0, -1):
        current, following = terms[k] + 2 * apply(current) - following, current
    return terms[0] + apply(current) - following


class ChebLayer(nn.Module):
    """``Σ_{k=0}^{K} T_k(−S) X Θ_k + bias`` (Defferrard et al. 2016 with λ_max = 2, i.e. L̃ = −S).

    With S = D^-½ A D^-½ this is PyG's ``ChebConv(K=K+1, normalization='sym', lambda_max=2)``. X is
    projected first (``X Θ_k``, one product) and the series summed by Clenshaw, so propagation runs on
    ``out_channels`` columns, not ``in_channels``.
    """

    def __init__(self, in_channels: int, out_channels: int, K: int) -> None:
        super().__init__()
        self.K = K
        self.weight = nn.Parameter(torch.empty(K + 1, in_channels, out_channels))
        self.bias = nn.Parameter(torch.zeros(out_channels))
        for k in range(K + 1):
            nn.init.xavier_uniform_(self.weight[k].T)

    def forward(self, x: torch.Tensor, propagate: Propagate) -> torch.Tensor:
        orders, n_in, n_out = self.weight.shape
        projected = project(x, self.weight.permute(1, 0, 2).reshape(n_in, orders * n_out))
        terms = projected.reshape(-1, orders, n_out).transpose(0, 1).contiguous()
        return chebyshev_series(terms, lambda v: -propagate(v)) + self.bias


class ChebNet(nn.Module):
    """Two Chebyshev layers: ``Cheb(drop(relu(Cheb(drop(X)))))`` on ``−S`` (the benchmarks' ChebNet).

    ``K`` is the highest polynomial order per layer (K = 1 is PyG's ``ChebConv(K=2)`` of GPRGNN/BernNet).
    """

    self_loops = False

    def __init__(
        self, in_channels: int, out_channels: int, hidden_channels: int = 64, K: int = 1, dropout: float = 0.5
    ) -> None:
        super().__init__()
        self.conv1 = ChebLayer(in_channels, hidden_channels, K)
        self.conv2 = ChebLayer(hidden_channels, out_channels, K)
        self.dropout = dropout

    def forward(self, x: torch.Tensor, propagate: Propagate) -> torch.Tensor:
        x = feature_dropout(x, self.dropout, self.training)
        x = F.relu(self.conv1(x, propagate))
        x = F.dropout(x, self.dropout, self.training)
        return self.conv2(x, propagate)

    def filter_parameters(self) -> list[nn.Parameter]:
        """ChebNet's filter weights are its layer weights; none are treated apart."""
        return []


class DecoupledSpectralGNN(nn.Module, ABC):
    """``g_Θ(S)·f_W(X)``: a two-layer MLP then a polynomial filter (subclasses define ``filter``)."""

    self_loops = False

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        hidden_channels: int = 64,
        K: int = 10,
        dropout: float = 0.5,
        dprate: float = 0.5,
    ) -> None:
        super().__init__()
        self.K = K
        self.lin1 = nn.Linear(in_channels, hidden_channels)
        self.lin2 = nn.Linear(hidden_channels, out_channels)
        self.dropout, self.dprate = dropout, dprate

    def mlp(self, x: torch.Tensor) -> torch.Tensor:
        """f_W(X): ``(n, in) -> (n, out)``; X dense or sparse COO."""
        x = feature_dropout(x, self.dropout, self.training)
        x = F.relu(project(x, self.lin1.weight.T) + self.lin1.bias)
        x = F.dropout(x, self.dropout, self.training)
        return self.lin2(x)

    @abstractmethod
    def filter(self, x: torch.Tensor, propagate: Propagate) -> torch.Tensor:
        """``g_Θ(S) x`` for ``x (n, channels)``."""

    def forward(self, x: torch.Tensor, propagate: Propagate) -> torch.Tensor:
        return self.filter(F.dropout(self.mlp(x), self.dprate, self.training), propagate)

    def filter_parameters(self) -> list[nn.Parameter]:
        """The filter's coefficients (their own learning rate and weight decay in the papers)."""
        mlp = {id(p) for p in (*self.lin1.parameters(), *self.lin2.parameters())}
        return [p for p in self.parameters() if id(p) not in mlp]

    @torch.no_grad()
    def response(self, eigenvalues: torch.Tensor) -> torch.Tensor:
        """The filter's frequency response ``h(λ)`` of S at ``eigenvalues (m,)`` -> ``(m, channels)``."""
        ones = eigenvalues.new_ones(eigenvalues.numel(), self.lin2.out_features)
        return self.filter(ones, lambda v: eigenvalues.unsqueeze(-1) * v)


class MLP(DecoupledSpectralGNN):
    """The graph-free baseline ``f_W(X)``: the decoupled bases' two-layer MLP with no filter after it (no
    propagation, no ``dprate`` dropout), so it shows what the features alone give."""

    def __init__(
        self, in_channels: int, out_channels: int, hidden_channels: int = 64, dropout: float = 0.5
    ) -> None:
        super().__init__(in_channels, out_channels, hidden_channels=hidden_channels, K=0, dropout=dropout)

    def filter(self, x: torch.Tensor, propagate: Propagate) -> torch.Tensor:
        return x

    def forward(self, x: torch.Tensor, propagate: Propagate) -> torch.Tensor:
        return self.mlp(x)


class GPRGNN(DecoupledSpectralGNN):
    """GPRGNN (Chien et al. 2021): ``Σ_{k=0}^{K} γ_k S^k Z`` with learnable γ, PPR init
    ``γ_k = α(1−α)^k``, ``γ_K = (1−α)^K``; natively S = Ã with self-loops."""

    self_loops = True

    def __init__(self, in_channels: int, out_channels: int, alpha: float = 0.1, **kwargs: float) -> None:
        super().__init__(in_channels, out_channels, **kwargs)
        gamma = alpha * (1 - alpha) ** torch.arange(self.K + 1, dtype=torch.float32)
        gamma[-1] = (1 - alpha) ** self.K
        self.gamma = nn.Parameter(gamma)

    def filter(self, x: torch.Tensor, propagate: Propagate) -> torch.Tensor:
        out = self.gamma[0] * x
        for k in range(1, self.K + 1):
            x = propagate(x)
            out = out + self.gamma[k] * x
        return out


class BernNet(DecoupledSpectralGNN):
    """BernNet (He et al. 2021): ``Σ_k relu(θ_k)·C(K,k)/2^K·(2I−L)^{K−k} L^k Z`` on ``L = I − S``.

    Evaluated in 2K products by Horner's rule in ``Q = L/2`` over the powers of ``P = (2I−L)/2``
    (the original spends O(K²)); θ starts at 1, the all-pass filter.
    """

    def __init__(self, in_channels: int, out_channels: int, **kwargs: float) -> None:
        super().__init__(in_channels, out_channels, **kwargs)
        self.theta = nn.Parameter(torch.ones(self.K + 1))
        self.register_buffer(
            "binomial", torch.tensor([math.comb(self.K, k) for k in range(self.K + 1)]).float()
        )

    def filter(self, x: torch.Tensor, propagate: Propagate) -> torch.Tensor:
        coefficients = F.relu(self.theta) * self.binomial
        powers = [x]  # P^j x, P = (I + S)/2
        for _ in range(self.K):
            powers.append(0.5 * (powers[-1] + propagate(powers[-1])))
        out = coefficients[self.K] * powers[0]
        for k in range(self.K - 1, -1, -1):
            out = 0.5 * (out - propagate(out)) + coefficients[k] * powers[self.K - k]  # Q = (I − S)/2
        return out


class ChebNetII(DecoupledSpectralGNN):
    """ChebNetII (He et al. 2022): Chebyshev interpolation through values ``relu(γ_j)`` at the Chebyshev
    nodes: ``w_k = 2/(K+1)·Σ_j relu(γ_j) T_k(x_j)`` and ``w_0/2·Z + Σ_{k≥1} w_k T_k(−S) Z``; γ starts at 1."""

    def __init__(self, in_channels: int, out_channels: int, **kwargs: float) -> None:
        super().__init__(in_channels, out_channels, **kwargs)
        self.gamma = nn.Parameter(torch.ones(self.K + 1))
        self.register_buffer("basis_at_nodes", chebyshev_matrix(chebyshev_nodes(self.K), self.K).float())

    def coefficients(self) -> torch.Tensor:
        """The Chebyshev coefficients ``(K+1,)`` with the first one halved."""
        w = 2.0 / (self.K + 1) * self.basis_at_nodes @ F.relu(self.gamma)
        return torch.cat([w[:1] / 2, w[1:]])

    def filter(self, x: torch.Tensor, propagate: Propagate) -> torch.Tensor:
        w = self.coefficients()
        out = 0
        for k, term in enumerate(chebyshev_terms(x, lambda v: -propagate(v), self.K)):
            out = out + w[k] * term
        return out


class JacobiConv(DecoupledSpectralGNN):
    """JacobiConv (Wang & Zhang 2022): per-channel ``Σ_k w_{k,c}·c_k·P_k^{(a,b)}(S) Z_{:,c}`` with the
    polynomial coefficient decomposition ``c_k = Π_{i<k} α_base·tanh(η_i)`` (η starts at 1, w at 1).

    AdaSpec's appendix searches a, b in [−0.5, 0.5]; the original JacobiConv has a linear f_W, here it
    is the shared MLP.
    """

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        a: float = 0.0,
        b: float = 0.0,
        alpha_base: float = 1.0,
        **kwargs: float,
    ) -> None:
        super().__init__(in_channels, out_channels, **kwargs)
        self.a, self.b, self.alpha_base = a, b, alpha_base
        self.eta = nn.Parameter(torch.ones(self.K))
        self.weight = nn.Parameter(torch.ones(self.K + 1, out_channels))

    def basis_scales(self) -> torch.Tensor:
        """``α_i = α_base·tanh(η_i)``, ``(K,)``: step k multiplies by α_{k−1}."""
        return self.alpha_base * torch.tanh(self.eta)

    def filter(self, x: torch.Tensor, propagate: Propagate) -> torch.Tensor:
        alpha = self.basis_scales()
        out = self.weight[0] * x
        previous, current = x, x
        for k in range(1, self.K + 1):
            A, B, C = jacobi_recurrence(k, self.a, self.b)
            following = alpha[k - 1] * (A * propagate(current) + B * current)
            if k > 1:
                following = following - alpha[k - 1] * alpha[k - 2] * C * previous
            previous, current = current, following
            out = out + self.weight[k] * current
        return out
