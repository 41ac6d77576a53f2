"""Each base's K-step sparse recurrence against the same polynomial built from a dense eigendecomposition."""

from __future__ import annotations

import math

import pytest
import torch
from scipy.special import eval_jacobi
from torch_geometric.nn import ChebConv

from litlab.methods.adaspec.bases import (
    GPRGNN,
    MLP,
    BernNet,
    ChebLayer,
    ChebNetII,
    JacobiConv,
    chebyshev_nodes,
    chebyshev_series,
    feature_dropout,
)
from litlab.methods.adaspec.matrix import NativeMatrix
from tests.methods.adaspec.graphs import random_graph

K = 6


@pytest.fixture(scope="module")
def operator():
    """Ã (no self-loops) of a random graph with twins and an isolated node, float64, and its eigenpairs."""
    edge_index = random_graph(n=20, seed=3)
    native = NativeMatrix(edge_index, 25, self_loops=False).double()
    op = native()
    eigenvalues, vectors = torch.linalg.eigh(op.to_dense())
    return op, eigenvalues, vectors


def _dense_filter(vectors: torch.Tensor, response: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
    """U diag(h(λ)) Uᵀ Z, with ``response (n,)`` shared by all channels or ``(n, channels)``."""
    projected = vectors.T @ z
    return vectors @ (response.unsqueeze(-1) * projected if response.dim() == 1 else response * projected)


def _randomise(module: torch.nn.Module, seed: int) -> None:
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for parameter in module.parameters():
            parameter.copy_(torch.randn(parameter.shape, generator=generator, dtype=parameter.dtype))


def _filter_input(n: int, channels: int = 3) -> torch.Tensor:
    return torch.randn(n, channels, generator=torch.Generator().manual_seed(7), dtype=torch.float64)


def test_gprgnn_is_a_monomial_series(operator) -> None:
    op, lam, vectors = operator
    model = GPRGNN(4, 3, K=K).double()
    _randomise(model, 0)
    z = _filter_input(op.num_nodes)
    gamma = model.gamma.detach()
    response = sum(gamma[k] * lam**k for k in range(K + 1))
    torch.testing.assert_close(model.filter(z, op), _dense_filter(vectors, response, z))


def test_gprgnn_starts_from_personalized_pagerank() -> None:
    model = GPRGNN(4, 3, K=4, alpha=0.2)
    expected = [0.2 * 0.8**k for k in range(4)] + [0.8**4]
    torch.testing.assert_close(model.gamma, torch.tensor(expected))
    assert math.isclose(float(model.gamma.detach().sum()), 1.0, rel_tol=1e-6)


def test_bernnet_is_a_bernstein_series_of_the_laplacian(operator) -> None:
    op, lam, vectors = operator
    model = BernNet(4, 3, K=K).double()
    _randomise(model, 1)
    z = _filter_input(op.num_nodes)
    theta = torch.relu(model.theta.detach())
    laplacian = 1 - lam  # eigenvalues of L = I − Ã
    response = sum(
        theta[k] * math.comb(K, k) / 2**K * (2 - laplacian) ** (K - k) * laplacian**k for k in range(K + 1)
    )
    torch.testing.assert_close(model.filter(z, op), _dense_filter(vectors, response, z))


def test_bernnet_starts_as_the_identity(operator) -> None:
    op, _, _ = operator
    z = _filter_input(op.num_nodes)
    torch.testing.assert_close(BernNet(4, 3, K=K).double().filter(z, op), z)


def test_chebnetii_interpolates_its_values_at_chebyshev_nodes(operator) -> None:
    op, lam, vectors = operator
    model = ChebNetII(4, 3, K=K).double()
    _randomise(model, 2)
    z = _filter_input(op.num_nodes)
    w = model.coefficients().detach()
    x = -lam  # L̂ − I = −Ã
    response = sum(w[k] * torch.cos(k * torch.arccos(x.clamp(-1, 1))) for k in range(K + 1))
    torch.testing.assert_close(model.filter(z, op), _dense_filter(vectors, response, z))
    # The filter passes through relu(γ_j) at the nodes x_j: h(x_j) = relu(γ_j) in the variable x = −λ.
    at_nodes = model.response(-chebyshev_nodes(K).double())[:, 0]
    torch.testing.assert_close(at_nodes, torch.relu(model.gamma.detach()))


def test_jacobiconv_matches_scipy_jacobi_polynomials(operator) -> None:
    op, lam, vectors = operator
    a, b = -0.3, 0.4
    model = JacobiConv(4, 3, K=K, a=a, b=b, alpha_base=0.9).double()
    _randomise(model, 3)
    z = _filter_input(op.num_nodes, 3)
    alpha = model.basis_scales().detach()
    scales = torch.cat([torch.ones(1, dtype=torch.float64), torch.cumprod(alpha, 0)])  # c_k = Π_{i<k} α_i
    weight = model.weight.detach()
    response = sum(
        scales[k] * torch.from_numpy(eval_jacobi(k, a, b, lam.numpy())).unsqueeze(-1) * weight[k]
        for k in range(K + 1)
    )
    torch.testing.assert_close(model.filter(z, op), _dense_filter(vectors, response, z))


def test_chebyshev_series_by_clenshaw(operator) -> None:
    op, lam, vectors = operator
    terms = torch.randn(
        K + 1, op.num_nodes, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(4)
    )
    expected = sum(
        _dense_filter(vectors, torch.cos(k * torch.arccos((-lam).clamp(-1, 1))), terms[k])
        for k in range(K + 1)
    )
    torch.testing.assert_close(chebyshev_series(terms, lambda v: -op(v)), expected)


@pytest.mark.parametrize("orders", [0, 1, 3])
def test_cheb_layer_equals_pyg_chebconv(orders: int) -> None:
    """ChebLayer on S = D^-½AD^-½ is PyG's ChebConv(K=orders+1, sym, λ_max=2), on dense and sparse input."""
    edge_index = random_graph(n=16, seed=5, isolated=0)
    n = int(edge_index.max()) + 1
    layer = ChebLayer(7, 4, orders).double()
    _randomise(layer, 5)
    reference = ChebConv(7, 4, K=orders + 1, normalization="sym").double()
    with torch.no_grad():
        for k, lin in enumerate(reference.lins):
            lin.weight.copy_(layer.weight[k].T)
        reference.bias.copy_(layer.bias)
    x = torch.randn(n, 7, dtype=torch.float64, generator=torch.Generator().manual_seed(6))
    op = NativeMatrix(edge_index, n, self_loops=False).double()()
    ones = torch.ones(edge_index.size(1), dtype=torch.float64)  # else PyG normalises in float32
    expected = reference(x, edge_index, ones, lambda_max=torch.tensor(2.0, dtype=torch.float64))
    torch.testing.assert_close(layer(x, op), expected)
    torch.testing.assert_close(layer(x.to_sparse(), op), expected)


@pytest.mark.parametrize("model_class", [GPRGNN, BernNet, ChebNetII, JacobiConv])
def test_response_is_the_filter_on_eigenvalues(model_class, operator) -> None:
    """``response(λ)`` evaluates the same recurrence on scalars: U diag(h(λ)) Uᵀ Z equals the filter."""
    op, lam, vectors = operator
    model = model_class(4, 3, K=K).double()
    _randomise(model, 8)
    z = _filter_input(op.num_nodes)
    response = model.response(lam)
    expected = vectors @ (response * (vectors.T @ z))
    torch.testing.assert_close(model.filter(z, op), expected)


def test_sparse_feature_dropout_has_dense_dropout_statistics() -> None:
    """Sparse dropout keeps zeros and keeps each stored entry with probability 1 − p, scaled by 1/(1 − p)."""
    x = torch.zeros(200, 50)
    x[::3, ::2] = 1.0
    torch.manual_seed(0)
    dropped = feature_dropout(x.to_sparse(), 0.3, training=True).to_dense()
    assert torch.all(dropped[x == 0] == 0)
    kept = dropped[x != 0]
    survivors = kept[kept != 0]
    torch.testing.assert_close(survivors, torch.full_like(survivors, 1 / 0.7))
    assert abs(survivors.numel() / kept.numel() - 0.7) < 0.03
    torch.testing.assert_close(feature_dropout(x.to_sparse(), 0.3, training=False).to_dense(), x)


def test_mlp_baseline_ignores_the_graph_and_has_no_filter(operator) -> None:
    """The graph-free baseline is the decoupled bases' own f_W: same output for any propagation."""
    op, _, _ = operator
    model = MLP(5, 3, hidden_channels=8).double().eval()
    x = _filter_input(25, 5)
    torch.testing.assert_close(model(x, op), model(x, lambda v: 0 * v))
    torch.testing.assert_close(model(x, op), model.mlp(x))
    assert model.filter_parameters() == []
