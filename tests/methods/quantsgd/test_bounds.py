"""The bounds: Zou et al.'s theorem by hand, the reconstructed quantized bound's properties (monotone in ε,
additive grows with d while multiplicative is dimension-free, 1/B only for activations and gradients),
where it claims to hold, and that it lies above the exact expected risk."""

from __future__ import annotations

import math

import pytest
import torch

from litlab.methods.quantsgd.bounds import RISK_FACTOR, quantized_bound, zou_terms
from litlab.methods.quantsgd.moments import data_moments
from litlab.methods.quantsgd.quantizers import Quantizer
from litlab.methods.quantsgd.recursion import expected_risk
from litlab.methods.quantsgd.simulator import Problem, Setting

PROBLEM = Problem()
STEPS = [2**k for k in range(4, 15)]


def _bound(setting: Setting, steps=STEPS, sup_norm: float = math.nan, sup_dev: float = math.nan):
    moments = data_moments(setting.data, PROBLEM.spectrum(setting.dim))
    return quantized_bound(PROBLEM, setting, moments, steps, sup_norm, sup_dev)


def test_full_precision_bound_is_zou_et_al_by_hand() -> None:
    # λ = (1, 1/4, 1/9), w* = 1, σ² = 1, γ = 0.05, N = 100: 1/(Nγ) = 0.2, so k* = 2.
    bias = (1 / 1 + 1 / 0.25) / (100 * 0.05) ** 2 + 1 / 9
    contraction = 1 - 0.05 * 3 * (1 + 1 / 4 + 1 / 9)
    dimension = 2 / 100 + 100 * 0.05**2 * (1 / 9) ** 2
    variance = (2 * 3 * ((1 + 1) / (100 * 0.05) + 1 / 9) + 1) / contraction * dimension
    bound = _bound(Setting(dim=3), [100])
    assert int(bound.k_star[0]) == 2
    assert bound.bias[0].item() == pytest.approx(bias)
    assert bound.variance[0].item() == pytest.approx(variance)
    assert bound.excess[0].item() == pytest.approx(RISK_FACTOR * (bias + variance))
    assert bound.excess_q[0].item() == pytest.approx(RISK_FACTOR * (bias + variance))
    k_star, *_ = zou_terms(PROBLEM.spectrum(3), -PROBLEM.w_star(3), 1.0, 0.05, [100], 3.0)
    assert k_star.tolist() == [2]


@pytest.mark.parametrize("target", ["label", "param", "act", "grad"])
@pytest.mark.parametrize("kind", ["additive", "multiplicative", "int", "fp"])
def test_bound_grows_with_the_noise_quantizers_eps(target: str, kind: str) -> None:
    previous = None
    for eps in (0.0, 1e-4, 1e-3, 1e-2, 3e-2):
        bound = _bound(Setting(dim=100, **{target: Quantizer(kind, eps)}), sup_norm=2.0, sup_dev=1.5)
        if previous is not None:
            assert (bound.excess_q > previous.excess_q).all() and (bound.excess > previous.excess).all()
        previous = bound


@pytest.mark.parametrize("kind", ["additive", "multiplicative", "int", "fp"])
def test_data_quantization_terms_grow_with_eps(kind: str) -> None:
    """ApproxErr, the distorted spectrum and k* grow with ε_d (the total bound need not: see the README)."""
    previous = None
    for eps in (0.0, 1e-4, 1e-3, 1e-2):
        setting = Setting(dim=100, data=Quantizer(kind, eps))
        moments = data_moments(setting.data, PROBLEM.spectrum(100))
        bound = quantized_bound(PROBLEM, setting, moments, STEPS)
        if previous is not None:
            assert bound.approx > previous[0].approx
            assert (moments.second >= previous[1].second).all() and (bound.k_star >= previous[0].k_star).all()
        previous = (bound, moments)


def test_additive_bound_grows_with_d_while_multiplicative_is_dimension_free() -> None:
    def at_end(kind: str, dim: int) -> float:
        return _bound(Setting(dim=dim, step_size=0.015, data=Quantizer(kind, 0.01)), [16384]).excess_q.item()

    dims = (50, 100, 200, 400, 1600)
    additive = [at_end("additive", d) for d in dims]
    multiplicative = [at_end("multiplicative", d) for d in dims]
    assert all(a < b for a, b in zip(additive, additive[1:]))
    assert additive[-1] > 10 * additive[0]
    # from d = 400 to 1600 the multiplicative bound only gains the tail 4·Σ_{400<i≤1600} i^-2 ≈ 0.0075
    assert multiplicative[-1] - multiplicative[3] < 0.01 < 1 < additive[-1] - additive[3]


@pytest.mark.parametrize("batch", [1, 4, 16, 64])
def test_only_activation_and_gradient_noise_scale_as_one_over_b(batch: int) -> None:
    full = _bound(Setting(dim=50, batch_size=batch)).noise
    for target in ("act", "grad"):
        increase = (
            _bound(Setting(dim=50, batch_size=batch, **{target: Quantizer("additive", 0.2)})).noise - full
        )
        assert increase == pytest.approx(0.2 / batch)
    param = _bound(Setting(dim=50, batch_size=batch, param=Quantizer("additive", 0.2))).noise - full
    trace = PROBLEM.spectrum(50).sum().item()
    assert param == pytest.approx(0.2 * trace * (3 / batch + 1 - 1 / batch))
    assert param >= 0.2 * trace  # does not vanish as B grows


def test_the_bound_claims_nothing_for_biased_quantizers_or_large_steps() -> None:
    assert not _bound(Setting(dim=20, data=Quantizer("fp8_e4m3"))).valid
    large = _bound(Setting(dim=20, step_size=0.5))
    assert not large.valid and "step size" in large.reason and torch.isinf(large.excess).all()
    with pytest.raises(ValueError, match="sup"):
        _bound(Setting(dim=20, act=Quantizer("multiplicative", 0.1)))


@pytest.mark.parametrize(
    "setting",
    [
        Setting(dim=50),
        Setting(dim=50, data=Quantizer("additive", 0.01)),
        Setting(dim=50, batch_size=4, act=Quantizer("additive", 1.0), param=Quantizer("additive", 0.3)),
        Setting(dim=50, batch_size=16, grad=Quantizer("additive", 2.0), label=Quantizer("additive", 0.5)),
    ],
)
def test_the_bound_is_above_the_exact_expected_risk(setting: Setting) -> None:
    steps = [16, 64, 256, 1024, 4096]
    bound = _bound(setting, steps)
    exact = expected_risk(PROBLEM, setting, steps)
    assert bound.valid
    assert (bound.excess > exact["risk"]).all() and (bound.excess_q > exact["risk_q"]).all()
