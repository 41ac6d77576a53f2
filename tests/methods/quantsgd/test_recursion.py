"""The exact risk recursion against a brute-force full-matrix recursion with an explicit double sum for
the average (no diagonal shortcut, no closed-form geometric sums), and its edge cases."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from litlab.methods.quantsgd.quantizers import Quantizer
from litlab.methods.quantsgd.recursion import expected_risk
from litlab.methods.quantsgd.simulator import Problem, Setting

PROBLEM = Problem(exponent=1.0, noise_std=0.6, w_star_value=1.3)


def _brute_force(setting: Setting, n_steps: int, residual_noise: float, param_noise: float) -> float:
    """E‖w̄_N − w*‖²_H from the full second-moment matrix, additive noises only, w_0 = 0."""
    lam = PROBLEM.spectrum(setting.dim).numpy()
    h, eye = np.diag(lam), np.eye(setting.dim)
    w_star = PROBLEM.w_star(setting.dim).numpy()
    gamma, b = setting.step_size, setting.batch_size
    m = np.outer(w_star, w_star)  # E[ηηᵀ] at η_0 = −w*
    moments = []
    for _ in range(n_steps):
        moments.append(m)
        u = m + param_noise * eye
        fourth = 2 * h @ u @ h + np.trace(h @ u) * h  # E[x xᵀ U x xᵀ] for Gaussian x
        m = (
            m
            - gamma * (h @ m + m @ h)
            + gamma**2 * (fourth / b + (1 - 1 / b) * h @ u @ h)
            + gamma**2 / b * (PROBLEM.noise_std**2 + residual_noise) * h
        )
    contraction = eye - gamma * h
    total = np.zeros_like(m)
    for s, m_s in enumerate(moments):
        total += m_s
        for t in range(s + 1, n_steps):
            power = np.linalg.matrix_power(contraction, t - s)
            total += power @ m_s + m_s @ power.T
    return float(np.trace(h @ total) / n_steps**2)


@pytest.mark.parametrize(
    "setting",
    [
        Setting(dim=4, batch_size=1, step_size=0.2),
        Setting(
            dim=4,
            batch_size=3,
            step_size=0.3,
            label=Quantizer("additive", 0.1),
            param=Quantizer("additive", 0.05),
            act=Quantizer("additive", 0.2),
            grad=Quantizer("additive", 0.3),
        ),
    ],
)
def test_diagonal_recursion_equals_the_full_matrix_recursion(setting: Setting) -> None:
    residual = sum(setting.quantizer(t).eps for t in ("label", "act", "grad"))
    exact = expected_risk(PROBLEM, setting, [5, 17, 30])["risk"]
    for n, value in zip([5, 17, 30], exact.tolist()):
        assert value == pytest.approx(_brute_force(setting, n, residual, setting.param.eps), rel=1e-10)


def test_quantized_risk_adds_the_approximation_error() -> None:
    eps = 0.05
    setting = Setting(dim=6, step_size=0.2, data=Quantizer("additive", eps))
    risks = expected_risk(PROBLEM, setting, [1])
    lam, w_star = PROBLEM.spectrum(6), PROBLEM.w_star(6)
    w_q = lam / (lam + eps) * w_star
    # N = 1: w̄ = w_0 = 0, so the risks are ‖w*‖²_H on both kinds of test input
    assert risks["risk"].item() == pytest.approx((lam * w_star**2).sum().item())
    assert risks["risk_q"].item() == pytest.approx((lam * w_star**2).sum().item())
    approx = ((lam + eps) * w_q**2 - 2 * lam * w_q * w_star).sum() + (lam * w_star**2).sum()
    assert approx.item() == pytest.approx((lam * eps / (lam + eps) * w_star**2).sum().item())


def test_multiplicative_eps_zero_is_full_precision_and_unsupported_kinds_raise() -> None:
    full = expected_risk(PROBLEM, Setting(dim=5), [3, 9])
    zero = expected_risk(PROBLEM, Setting(dim=5, grad=Quantizer("multiplicative", 0.0)), [3, 9])
    assert torch.equal(full["risk"], zero["risk"])
    with pytest.raises(ValueError, match="data quantizers"):
        expected_risk(PROBLEM, Setting(dim=5, data=Quantizer("multiplicative", 0.1)), [3])
    with pytest.raises(ValueError, match="param quantizers"):
        expected_risk(PROBLEM, Setting(dim=5, param=Quantizer("int", 0.1)), [3])
