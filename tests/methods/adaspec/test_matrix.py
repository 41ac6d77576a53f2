"""Ω, Ω_D, Ω_F and Ã as sparse operators against the paper's dense formulas; guards; equivariance."""

from __future__ import annotations

import functools

import pytest
import torch

from litlab.core.errors import LitlabError
from litlab.datamodules.csbm import csbm
from litlab.methods.adaspec.bases import GPRGNN, ChebNet
from litlab.methods.adaspec.matrix import (
    AdaSpecMatrix,
    NativeMatrix,
    feature_edge_weights,
    initial_b,
    node_degree,
    omega,
    softplus_inverse,
)
from litlab.methods.adaspec.network import GraphModel
from tests.methods.adaspec.graphs import dense_adjacency, random_graph

N = 28  # 24 random + 3 twin leaves + 1 isolated node


def dense_omega(
    adjacency: torch.Tensor, x: torch.Tensor, b: torch.Tensor, alpha1: float, alpha2: float
) -> torch.Tensor:
    """Ω written as the paper does: (D+B)^-½(A+B)(D+B)^-½ + α1 I + α2 Σ_i (X_:i X_:iᵀ/‖X_:i‖²) ∘ A."""
    total = adjacency.sum(1) + b
    scale = torch.diag(torch.where(total > 0, total.clamp_min(1e-300) ** -0.5, torch.zeros_like(total)))
    omega_f = torch.zeros_like(adjacency)
    for i in range(x.size(1)):
        column = x[:, i : i + 1]
        if column.square().sum() > 0:
            omega_f += column @ column.T / column.square().sum() * adjacency
    return (
        scale @ (adjacency + torch.diag(b)) @ scale
        + alpha1 * torch.eye(len(b), dtype=b.dtype)
        + alpha2 * omega_f
    )


@pytest.fixture(scope="module")
def graph() -> tuple[torch.Tensor, torch.Tensor]:
    """A random graph with twins and an isolated node, and float64 features with one all-zero column."""
    edge_index = random_graph()
    x = torch.rand(N, 6, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    x[:, 2] = 0.0
    return edge_index, x


def test_feature_weights_are_the_column_normalised_products_on_edges(graph) -> None:
    edge_index, x = graph
    adjacency = dense_adjacency(edge_index, N)
    expected = dense_omega(adjacency, x, torch.zeros(N, dtype=torch.float64), 0.0, 1.0)
    expected -= dense_omega(adjacency, x, torch.zeros(N, dtype=torch.float64), 0.0, 0.0)
    weights = feature_edge_weights(x, edge_index, chunk_elements=7)  # several chunks
    torch.testing.assert_close(weights, expected[edge_index[0], edge_index[1]])
    assert torch.isfinite(weights).all()


@pytest.mark.parametrize("b_init", ["degree", "n"])
@pytest.mark.parametrize(("alpha1", "alpha2"), [(0.0, 0.1), (0.5, 1.0), (-0.3, 0.0)])
def test_omega_matches_the_dense_formula(graph, b_init: str, alpha1: float, alpha2: float) -> None:
    edge_index, x = graph
    matrix = AdaSpecMatrix(edge_index, x, alpha1, alpha2, b_init=b_init, rescale="none").double()
    with torch.no_grad():  # a generic b, not only the initial one
        matrix.b_raw.add_(
            0.3 * torch.randn(N, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
        )
    expected = dense_omega(dense_adjacency(edge_index, N), x, matrix.b.detach(), alpha1, alpha2)
    torch.testing.assert_close(matrix().to_dense().detach(), expected)


def test_initial_b_guards_isolated_nodes_and_offers_one_over_n() -> None:
    degree = torch.tensor([3.0, 1.0, 0.0, 2.0])
    torch.testing.assert_close(initial_b(degree, "degree"), torch.tensor([1 / 3, 1.0, 1.0, 0.5]))
    torch.testing.assert_close(initial_b(degree, "n"), torch.full((4,), 0.25))
    torch.testing.assert_close(
        torch.nn.functional.softplus(softplus_inverse(initial_b(degree))), initial_b(degree)
    )
    with pytest.raises(ValueError, match="b_init"):
        initial_b(degree, "bad")


def test_isolated_nodes_stay_finite(graph) -> None:
    edge_index, x = graph
    op = AdaSpecMatrix(edge_index, x, 0.2, 0.1).double()()
    assert torch.isfinite(op.to_dense()).all()
    native = NativeMatrix(edge_index, N, self_loops=False).double()().to_dense()
    assert torch.isfinite(native).all() and native[-1].abs().sum() == 0  # the isolated node: a zero row


@pytest.mark.parametrize("self_loops", [False, True])
def test_native_matrix_is_the_gcn_normalisation(graph, self_loops: bool) -> None:
    edge_index, _ = graph
    adjacency = dense_adjacency(edge_index, N) + float(self_loops) * torch.eye(N, dtype=torch.float64)
    degree = adjacency.sum(1)
    inv = torch.where(degree > 0, degree.clamp_min(1e-300) ** -0.5, torch.zeros_like(degree))
    expected = inv[:, None] * adjacency * inv[None, :]
    torch.testing.assert_close(NativeMatrix(edge_index, N, self_loops).double()().to_dense(), expected)


def test_omega_d_spectrum_stays_in_unit_interval_and_radius_rescale_bounds_omega(graph) -> None:
    edge_index, x = graph
    generator = torch.Generator().manual_seed(3)
    for alpha1, alpha2 in [(0.0, 0.0), (0.7, 0.5), (-1.0, 2.0)]:
        matrix = AdaSpecMatrix(edge_index, x, alpha1, alpha2).double()
        with torch.no_grad():
            matrix.b_raw.copy_(3 * torch.randn(N, dtype=torch.float64, generator=generator))
        eigenvalues = torch.linalg.eigvalsh(matrix().to_dense().detach())
        assert eigenvalues.abs().max() <= 1 + 1e-12
        if alpha1 == alpha2 == 0.0:  # Ω_D alone: a normalized adjacency, top eigenvalue exactly 1
            assert abs(float(eigenvalues.max()) - 1.0) < 1e-10


def test_radius_rescale_is_tight_and_safe_on_a_larger_graph() -> None:
    """n > 256 takes the Lanczos path for ρ(Ω_F): the rescaled spectrum stays in [−1, 1] yet fills it."""
    graph = csbm(n=400, p=30, phi=0.3, seed=0)
    matrix = AdaSpecMatrix(graph.edge_index, graph.x.double(), alpha1=0.2, alpha2=1.0).double()
    eigenvalues = torch.linalg.eigvalsh(matrix().to_dense().detach())
    assert eigenvalues.abs().max() <= 1 and eigenvalues.abs().max() > 0.75


def test_gradient_reaches_b(graph) -> None:
    edge_index, x = graph
    matrix = AdaSpecMatrix(edge_index, x.float())
    z = torch.randn(N, 3)
    matrix()(z).square().sum().backward()
    assert matrix.b_raw.grad is not None and matrix.b_raw.grad.abs().sum() > 0


def test_omega_is_permutation_equivariant_when_b_is_permuted(graph) -> None:
    edge_index, x = graph
    perm = torch.randperm(N, generator=torch.Generator().manual_seed(4))
    inverse = torch.argsort(perm)  # new node i is old node perm[i]
    original = AdaSpecMatrix(edge_index, x, 0.3, 0.2).double()
    permuted = AdaSpecMatrix(inverse[edge_index], x[perm], 0.3, 0.2).double()
    with torch.no_grad():
        original.b_raw.add_(torch.randn(N, dtype=torch.float64, generator=torch.Generator().manual_seed(5)))
        permuted.b_raw.copy_(original.b_raw[perm])
    big = original().to_dense().detach()
    torch.testing.assert_close(permuted().to_dense().detach(), big[perm][:, perm])
    # With b left unpermuted the matrix is not the permuted one: b really is per node.
    with torch.no_grad():
        permuted.b_raw.copy_(original.b_raw)
    assert not torch.allclose(permuted().to_dense().detach(), big[perm][:, perm])


@pytest.mark.parametrize("backbone", [GPRGNN, ChebNet])
def test_adaspec_model_is_permutation_equivariant(graph, backbone) -> None:
    edge_index, x = graph
    x = x.float()
    perm = torch.randperm(N, generator=torch.Generator().manual_seed(6))
    inverse = torch.argsort(perm)
    factory = functools.partial(AdaSpecMatrix, alpha1=0.2, alpha2=0.3)
    torch.manual_seed(0)
    model = GraphModel(functools.partial(backbone, K=3), factory, edge_index, x, num_classes=4).eval()
    permuted = GraphModel(functools.partial(backbone, K=3), factory, inverse[edge_index], x[perm], 4).eval()
    permuted.load_state_dict(model.state_dict())
    with torch.no_grad():
        model.matrix.b_raw.add_(torch.randn(N, generator=torch.Generator().manual_seed(7)))
        permuted.matrix.b_raw.copy_(model.matrix.b_raw[perm])
        torch.testing.assert_close(permuted(x[perm]), model(x)[perm], atol=1e-5, rtol=1e-5)


def test_omega_function_and_module_agree(graph) -> None:
    edge_index, x = graph
    matrix = AdaSpecMatrix(edge_index, x, 0.1, 0.4, rescale="none").double()
    degree = node_degree(edge_index, N, torch.float64)
    weight, diagonal = omega(edge_index, degree, matrix.b, feature_edge_weights(x, edge_index), 0.1, 0.4)
    op = matrix()
    torch.testing.assert_close(op.weight, weight)
    torch.testing.assert_close(op.diagonal, diagonal)


def test_ablation_flags_remove_omega_f_and_freeze_b(graph) -> None:
    """``feature_term=False`` is Ω_D + α1·I rescaled by |α1| + 1 (no Ω_F anywhere); ``learn_b=False``
    leaves b at 1/D, with no gradient and no optimizer group."""
    edge_index, x = graph
    ablated = AdaSpecMatrix(edge_index, x, alpha1=0.3, alpha2=0.5, feature_term=False).double()
    expected = dense_omega(dense_adjacency(edge_index, N), x, ablated.b.detach(), 0.3, 0.0) / 1.3
    torch.testing.assert_close(ablated().to_dense().detach(), expected)
    assert ablated.alpha2 == 0.0 and not ablated.feature_weight.any()
    frozen = AdaSpecMatrix(edge_index, x.float(), learn_b=False)
    assert not frozen.b_raw.requires_grad
    model = GraphModel(functools.partial(GPRGNN, K=2), functools.partial(AdaSpecMatrix, learn_b=False),
                       edge_index, x.float(), num_classes=3)  # fmt: skip
    grouped = {id(p) for group in model.parameter_groups() for p in group["params"]}
    assert id(model.matrix.b_raw) not in grouped


def test_adaspec_without_its_mechanisms_is_the_base_matrix(graph) -> None:
    """With b → 0 and no Ω_F, Ω_D is the bases' Ã without self-loops, except on the isolated node, whose
    row is b/(0 + b) = 1 for any b > 0 (the guard that keeps it finite)."""
    edge_index, x = graph
    matrix = AdaSpecMatrix(edge_index, x, feature_term=False).double()
    with torch.no_grad():
        matrix.b_raw.fill_(-60.0)  # softplus(−60) ≈ 1e-26
    native = NativeMatrix(edge_index, N, self_loops=False).double()().to_dense()
    ablated = matrix().to_dense().detach()
    assert abs(float(ablated[-1, -1]) - 1.0) < 1e-12 and native[-1, -1] == 0.0  # node N − 1: isolated
    torch.testing.assert_close(ablated[:-1, :-1], native[:-1, :-1], atol=1e-12, rtol=0)


def test_bad_matrix_options_are_one_line_errors(graph) -> None:
    edge_index, x = graph
    with pytest.raises(LitlabError, match="rescale must be 'radius' or 'none'"):
        AdaSpecMatrix(edge_index, x, rescale="lambda_max")
    with pytest.raises(LitlabError, match="b_init must be 'degree' or 'n'"):
        AdaSpecMatrix(edge_index, x, b_init="ones")
