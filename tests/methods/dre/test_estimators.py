"""Kernel estimators against brute force: exact KuLSIF (Kanamori et al. 2012's closed form), per-point ridge
solves, scikit-learn's class-balanced logistic regression, stationarity of the Newton solutions, KLIEP's
constraints, and the grid's prediction layout."""

from __future__ import annotations

import pytest
import torch
from sklearn.linear_model import LogisticRegression

from litlab.core.errors import ConfigError
from litlab.methods.dre.estimators import fit_grid, newton_erm, ridge_lsif
from litlab.methods.dre.kernels import gaussian_features, median_distance, nystrom_transforms
from litlab.methods.dre.losses import get_loss
from tests.methods.dre.helpers import grid_axes, samples


def exact_kulsif(
    x_p: torch.Tensor, x_q: torch.Tensor, sigma: float, lam: float, x: torch.Tensor
) -> torch.Tensor:
    """KuLSIF over the whole RKHS: f = Σ_j a_j k(·, y_j) + (1/(λM)) Σ_i k(·, x_i),
    a = −(K_QQ + λN I)⁻¹ K_QP 1 / (λM) (Kanamori, Suzuki & Sugiyama 2012)."""
    s = torch.tensor([sigma], dtype=torch.float64)
    m, n = len(x_p), len(x_q)
    k_qq, k_qp = gaussian_features(x_q, x_q, s)[0], gaussian_features(x_q, x_p, s)[0]
    a = -torch.linalg.solve(k_qq + lam * n * torch.eye(n, dtype=torch.float64), k_qp.sum(1)) / (lam * m)
    return gaussian_features(x, x_q, s)[0] @ a + gaussian_features(x, x_p, s)[0].sum(1) / (lam * m)


def test_nystrom_kulsif_on_all_points_is_exact_kulsif() -> None:
    x_p, x_q = samples(25, 30)
    x = torch.randn(40, 2, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    sigmas, lams = grid_axes([0.7, 1.5], [1e-2, 1.0])
    grid = fit_grid("kulsif", x_p, x_q, torch.cat([x_p, x_q]), sigmas, lams)
    predicted = grid.predict(x)
    for index, label in enumerate(grid.labels()):
        torch.testing.assert_close(
            predicted[index], exact_kulsif(x_p, x_q, label["sigma"], label["lam"], x), rtol=1e-5, atol=2e-5
        )


def test_ridge_lsif_equals_one_solve_per_grid_point() -> None:
    x_p, x_q = samples(80, 90)
    sigmas, lams = grid_axes([0.5, 2.0], [1e-4, 1e-1, 10.0])
    feat_p, feat_q = gaussian_features(x_p, x_p[:30], sigmas), gaussian_features(x_q, x_p[:30], sigmas)
    theta = ridge_lsif(feat_p, feat_q, lams)
    for s in range(2):
        gram = feat_q[s].T @ feat_q[s] / 90
        for l, lam in enumerate(lams):
            expected = torch.linalg.solve(gram + lam * torch.eye(30, dtype=torch.float64), feat_p[s].mean(0))
            torch.testing.assert_close(theta[s, l], expected)


def test_nystrom_features_have_the_kernel_as_inner_product() -> None:
    x_p, _ = samples(60, 1)
    sigmas, _ = grid_axes([1.0, 3.0], [0.0])
    centres = x_p[:20]
    features = gaussian_features(x_p, centres, sigmas) @ nystrom_transforms(centres, sigmas)
    # Ψ Ψᵀ is the Nyström approximation, exact on the centres themselves
    torch.testing.assert_close(
        features[:, :20] @ features[:, :20].transpose(1, 2),
        gaussian_features(centres, centres, sigmas),
        atol=1e-6,
        rtol=0,
    )


@pytest.mark.parametrize("name", ["lr", "exp", "sq"])
def test_newton_solutions_are_stationary(name: str) -> None:
    x_p, x_q = samples(120, 150, separation=1.5)
    sigmas, lams = grid_axes([0.5, 1.5], [1e-3, 1e-1, 1.0])
    feat_p, feat_q = gaussian_features(x_p, x_p[:25], sigmas), gaussian_features(x_q, x_p[:25], sigmas)
    u = newton_erm(get_loss(name), feat_p, feat_q, lams).requires_grad_(True)
    loss = get_loss(name)
    objective = (
        loss.risk(torch.einsum("smb,slb->slm", feat_p, u), torch.einsum("smb,slb->slm", feat_q, u))
        + lams * u.square().sum(-1) / 2
    )
    (grad,) = torch.autograd.grad(objective.sum(), u)
    assert grad.abs().max() < 1e-6


def test_square_loss_is_solved_in_closed_form() -> None:
    x_p, x_q = samples(70, 60)
    sigmas, lams = grid_axes([1.0], [1e-2])
    feat_p, feat_q = gaussian_features(x_p, x_p[:20], sigmas)[0], gaussian_features(x_q, x_p[:20], sigmas)[0]
    lhs = 2 * feat_p.T @ feat_p / 70 + 2 * feat_q.T @ feat_q / 60 + 1e-2 * torch.eye(20, dtype=torch.float64)
    expected = torch.linalg.solve(lhs, 2 * feat_p.mean(0) - 2 * feat_q.mean(0))
    u = newton_erm(get_loss("sq"), feat_p[None], feat_q[None], lams, max_iter=1)
    torch.testing.assert_close(u[0, 0], expected)


def test_kernel_logistic_regression_matches_scikit_learn() -> None:
    x_p, x_q = samples(100, 140, separation=1.5)
    sigmas, lams = grid_axes([1.0], [0.05])
    centres = x_p[:30]
    grid = fit_grid("lr", x_p, x_q, centres, sigmas, lams)
    features = (gaussian_features(torch.cat([x_p, x_q]), centres, sigmas) @ grid.transforms)[0]
    labels = torch.cat([torch.ones(100), -torch.ones(140)])
    # sklearn: ½‖w‖² + C Σ_i c_i ℓ_i with balanced c_i = n/(2 n_class) is (C n/2)·(risk + ‖w‖²/(C n))
    reference = LogisticRegression(
        C=2 / (0.05 * 240), class_weight="balanced", fit_intercept=False, tol=1e-12, max_iter=10_000
    )
    reference.fit(features.numpy(), labels.numpy())
    torch.testing.assert_close(
        grid.coefficients[0, 0], torch.from_numpy(reference.coef_[0]), atol=1e-5, rtol=1e-4
    )


def test_kliep_satisfies_its_constraints_and_ulsif_is_nonnegative() -> None:
    x_p, x_q = samples(150, 200, separation=1.5)
    sigmas, lams = grid_axes([0.3, 1.0, 3.0], [1e-3, 1.0])
    kliep = fit_grid("kliep", x_p, x_q, x_p[:40], sigmas, lams)
    assert kliep.coefficients.shape == (3, 1, 40) and (kliep.coefficients >= 0).all()
    torch.testing.assert_close(kliep.predict(x_q).mean(1), torch.ones(3, dtype=torch.float64))
    ulsif = fit_grid("ulsif", x_p, x_q, x_p[:40], sigmas, lams)
    assert (ulsif.coefficients >= 0).all() and (ulsif.predict(x_q) >= 0).all()


def test_predictions_are_sigma_major_and_chunking_does_not_matter() -> None:
    x_p, x_q = samples(60, 60)
    sigmas, lams = grid_axes([0.5, 2.0], [1e-3, 1e-1, 1.0])
    grid = fit_grid("kulsif", x_p, x_q, x_p[:20], sigmas, lams)
    assert grid.size == 6 and [(l["sigma"], l["lam"]) for l in grid.labels()][1] == (0.5, 0.1)
    single = fit_grid("kulsif", x_p, x_q, x_p[:20], sigmas[1:], lams[1:2])
    torch.testing.assert_close(grid.predict(x_q)[4], single.predict(x_q)[0])
    torch.testing.assert_close(grid.predict(x_q, chunk=7), grid.predict(x_q))


def test_median_distance_and_unknown_method() -> None:
    x = torch.tensor([[0.0, 0.0], [3.0, 4.0], [0.0, 1.0]], dtype=torch.float64)
    assert median_distance(x) == pytest.approx(18**0.5)  # distances 5, 1, sqrt(18)
    with pytest.raises(ConfigError, match="kulsif, ulsif, kliep"):
        fit_grid("kmm", x, x, x, *grid_axes([1.0], [1.0]))
