"""The Cartan penalties and residuals against brute-force loops and a known symmetric pair."""

from __future__ import annotations

import itertools

import torch

from litlab.methods.symspace.lie import (
    LieBases,
    bracket,
    cartan_orthogonality,
    cartan_projection,
    cartan_residuals,
    commutator_ratio,
    span_overlap,
    span_residual,
)


def so_split(a: int, b: int) -> tuple[torch.Tensor, torch.Tensor]:
    """so(a+b) = k ⊕ p, k = so(a) ⊕ so(b) block-diagonal, and p the off-diagonal block (symmetric pair)."""
    n = a + b
    k, p = [], []
    for i, j in itertools.combinations(range(n), 2):
        e = torch.zeros(n, n, dtype=torch.float64)
        e[i, j], e[j, i] = 1.0, -1.0
        (k if (i < a) == (j < a) else p).append(e)
    return torch.stack(k), torch.stack(p)


def brute_orthogonality(k: torch.Tensor, p: torch.Tensor) -> dict[str, float]:
    def comm(x, y):
        return x @ y - y @ x

    def mean_sq(pairs, targets):
        return sum(float((comm(x, y) * t).sum()) ** 2 for x, y in pairs for t in targets) / (
            len(pairs) * len(targets)
        )

    return {
        "kk": mean_sq([(k[i], k[j]) for i, j in itertools.combinations(range(len(k)), 2)], p),
        "kp": mean_sq([(x, y) for x in k for y in p], k),
        "pp": mean_sq([(p[i], p[j]) for i, j in itertools.combinations(range(len(p)), 2)], p),
    }


def test_bracket_matches_matrix_commutator() -> None:
    a, b = torch.randn(3, 4, 4, dtype=torch.float64), torch.randn(2, 4, 4, dtype=torch.float64)
    out = bracket(a, b)
    assert out.shape == (3, 2, 4, 4)
    torch.testing.assert_close(out[2, 1], a[2] @ b[1] - b[1] @ a[2])


def test_orthogonality_penalty_matches_brute_force() -> None:
    torch.manual_seed(0)
    k, p = torch.randn(3, 4, 4, dtype=torch.float64), torch.randn(4, 4, 4, dtype=torch.float64)
    got = {name: float(value) for name, value in cartan_orthogonality(k, p).items()}
    expected = brute_orthogonality(k, p)
    for name in expected:
        assert abs(got[name] - expected[name]) <= 1e-9 * max(1.0, expected[name]), name


def test_penalties_vanish_on_a_symmetric_pair_and_not_on_random_bases() -> None:
    k, p = so_split(2, 3)  # so(5): dim k = 1 + 3, dim p = 6
    assert (k.shape[0], p.shape[0]) == (4, 6)
    for value in [*cartan_orthogonality(k, p).values(), *cartan_residuals(k, p).values()]:
        assert float(value) < 1e-20
    torch.manual_seed(0)
    rk, rp = torch.randn_like(k), torch.randn_like(p)
    for value in [*cartan_orthogonality(rk, rp).values(), *cartan_residuals(rk, rp).values()]:
        assert float(value) > 1e-3
    # Swapping the roles of k and p breaks [p, p] ⊂ k: the pair is not a Cartan decomposition any more.
    assert float(cartan_residuals(p, k)["pp"]) > 0.1


def test_a_single_basis_has_no_pairs_and_zero_penalty_not_nan() -> None:
    torch.manual_seed(0)
    k, p = torch.randn(1, 4, 4, requires_grad=True), torch.randn(1, 4, 4, requires_grad=True)
    penalties = cartan_orthogonality(k, p)
    assert float(penalties["kk"].detach()) == 0.0 and float(penalties["pp"].detach()) == 0.0
    assert torch.isfinite(penalties["kp"]) and float(penalties["kp"].detach()) > 0
    sum(penalties.values()).backward()
    assert torch.isfinite(k.grad).all() and torch.isfinite(p.grad).all()


def test_residual_is_the_share_outside_the_span() -> None:
    basis = torch.zeros(2, 3, 3, dtype=torch.float64)
    basis[0, 0, 0], basis[1, 1, 1] = 1.0, 1.0
    inside, outside = torch.zeros(3, 3, dtype=torch.float64), torch.zeros(3, 3, dtype=torch.float64)
    inside[0, 0], outside[2, 2] = 3.0, 4.0  # ‖inside‖² = 9, ‖outside‖² = 16

    assert abs(float(span_residual((inside + outside)[None], basis)) - 16 / 25) < 1e-12


def test_lie_element_is_the_coefficient_sum_of_bases() -> None:
    torch.manual_seed(0)
    bases = LieBases(n_k=2, n_p=3, dim=4)
    c_k, c_p = torch.randn(5, 2), torch.randn(5, 3)
    x = bases(c_k, c_p)
    expected = sum(c_k[1, i] * bases.k[i] for i in range(2)) + sum(c_p[1, j] * bases.p[j] for j in range(3))
    torch.testing.assert_close(x[1], expected)
    norms = [b.norm() for b in [*bases.k, *bases.p]]
    torch.testing.assert_close(bases.nontriviality(), sum(1 / n for n in norms))


def test_projection_form_is_the_per_bracket_share_outside_the_span_and_scale_free() -> None:
    torch.manual_seed(0)
    k, p = torch.randn(2, 4, 4, dtype=torch.float64), torch.randn(3, 4, 4, dtype=torch.float64)
    got = cartan_projection(k, p)
    per_bracket = {
        "kk": [span_residual(bracket(k, k)[0, 1][None], k)],
        "kp": [span_residual(bracket(k, p)[i, j][None], p) for i in range(2) for j in range(3)],
        "pp": [span_residual(bracket(p, p)[i, j][None], k) for i, j in itertools.combinations(range(3), 2)],
    }
    for name, values in per_bracket.items():
        torch.testing.assert_close(got[name], torch.stack(values).mean())
    qk, _ = torch.linalg.qr(k.flatten(1).T)
    qp, _ = torch.linalg.qr(p.flatten(1).T)
    torch.testing.assert_close(got["perp"], (qk.T @ qp).square().sum() / 2)
    # Rescaling the bases (the shrinkage that satisfies the orthogonality form) changes nothing here.
    for name, value in cartan_projection(1e-3 * k, 1e-3 * p).items():
        torch.testing.assert_close(value, got[name])
    assert float(sum(cartan_orthogonality(1e-3 * k, 1e-3 * p).values())) < 1e-10


def test_projection_form_vanishes_on_symmetric_pairs_only() -> None:
    k, p = so_split(2, 3)
    assert all(float(v) < 1e-20 for v in cartan_projection(k, p).values())
    assert float(cartan_projection(p, k)["pp"]) > 0.1
    # k = p = so(5) meets the three inclusions (any subalgebra does); the k ⊥ p term catches it.
    whole = torch.cat([k, p])
    terms = cartan_projection(whole, whole)
    assert max(float(terms[n]) for n in ("kk", "kp", "pp")) < 1e-20 and float(terms["perp"]) > 0.99
    assert float(span_overlap(whole, whole)) > 0.99 and float(span_overlap(k, p)) < 1e-20


def test_commutator_ratio_detects_commuting_bases() -> None:
    k, p = so_split(2, 3)
    assert all(float(v) > 0.05 for v in commutator_ratio(k, p).values())
    diagonal = torch.diag_embed(torch.randn(3, 4, dtype=torch.float64))
    assert all(float(v) < 1e-20 for v in commutator_ratio(diagonal[:1], diagonal[1:]).values())
    # Commuting bases meet all three inclusions trivially: the residual alone cannot tell.
    assert all(float(v) < 1e-20 for v in cartan_residuals(diagonal[:1], diagonal[1:]).values())


def test_projection_form_with_one_basis_is_finite() -> None:
    torch.manual_seed(0)
    k, p = torch.randn(1, 3, 3, requires_grad=True), torch.randn(1, 3, 3, requires_grad=True)
    terms = cartan_projection(k, p)
    assert float(terms["kk"]) == 0.0 and float(terms["pp"]) == 0.0
    sum(terms.values()).backward()
    assert torch.isfinite(k.grad).all() and torch.isfinite(p.grad).all()


def test_gradient_descent_on_the_projection_form_finds_a_non_abelian_cartan_pair() -> None:
    """From random bases (n_k=1, n_p=2, m=3) Adam on the projection form + non-triviality reaches residuals
    < 0.05 with k ⊥ p and non-commuting brackets; the orthogonality form leaves residuals near 0.9."""
    measured = {}
    for form in ("projection", "orthogonality"):
        torch.manual_seed(0)
        bases = LieBases(n_k=1, n_p=2, dim=3)
        adam = torch.optim.Adam(bases.parameters(), lr=1e-2)
        loss_of = cartan_projection if form == "projection" else cartan_orthogonality
        for _ in range(600):
            loss = sum(loss_of(bases.k, bases.p).values()) + 1e-3 * bases.nontriviality()
            adam.zero_grad()
            loss.backward()
            adam.step()
        with torch.no_grad():
            measured[form] = (
                max(float(v) for v in cartan_residuals(bases.k, bases.p).values()),
                min(float(v) for v in commutator_ratio(bases.k, bases.p).values()),
                float(span_overlap(bases.k, bases.p)),
            )
    residual, commutators, overlap = measured["projection"]
    assert residual < 0.05 and commutators > 0.1 and overlap < 0.05, measured
    assert measured["orthogonality"][0] > 0.5, measured
