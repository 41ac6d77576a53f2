"""Moments of quantized Gaussian data against Monte Carlo, and the closed-form approximation errors."""

from __future__ import annotations

import pytest
import torch

from litlab.methods.quantsgd.moments import data_moments
from litlab.methods.quantsgd.quantizers import NOISE, Quantizer, fp_eps, int_eps, quantize

SPECTRUM = torch.tensor([1.0, 0.3, 0.05, 0.004, 1e-4], dtype=torch.float64)
W_STAR = torch.tensor([1.0, -0.5, 2.0, 1.0, 3.0], dtype=torch.float64)
N_MC = 400_000


def _monte_carlo(quantizer: Quantizer) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Samples x ~ N(0, diag(SPECTRUM)), Q(x), and y = xᵀw* (noise-free)."""
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(N_MC, len(SPECTRUM), generator=generator, dtype=torch.float64) * SPECTRUM.sqrt()
    noise = None
    if quantizer.kind in NOISE:
        draw = torch.randn if NOISE[quantizer.kind] == "normal" else torch.rand
        noise = draw(x.shape, generator=generator, dtype=torch.float64)
    return x, quantize(x, quantizer.kind, quantizer.eps, noise), x @ W_STAR


QUANTIZERS = [
    Quantizer("additive", 0.01),
    Quantizer("multiplicative", 0.05),
    Quantizer("int", int_eps(4, 3.0)),
    Quantizer("fp", fp_eps(2)),
    Quantizer("fp8_e4m3"),
    Quantizer("bf16"),
]


@pytest.mark.parametrize("quantizer", QUANTIZERS, ids=lambda q: q.kind)
def test_moments_match_monte_carlo(quantizer: Quantizer) -> None:
    moments = data_moments(quantizer, SPECTRUM)
    x, q, y = _monte_carlo(quantizer)
    for exact, sample in ((moments.second, q**2), (moments.cross, q * x)):
        standard_error = (sample.var(0) / N_MC).sqrt()
        assert ((sample.mean(0) - exact).abs() < 5 * standard_error + 1e-12).all(), (sample.mean(0), exact)
    # the risk on quantized test inputs, E[(Q(x)ᵀw − y)²] (σ = 0), for some w
    w = torch.linspace(-1, 2, len(SPECTRUM), dtype=torch.float64)
    empirical = ((q @ w - y) ** 2).mean()
    exact = moments.quantized_risk(w, SPECTRUM, W_STAR)
    assert exact.item() == pytest.approx(empirical.item(), rel=0.01)
    assert moments.kurtosis >= 3


def test_optimum_and_approximation_error_in_closed_form() -> None:
    eps = 0.02
    energy = (SPECTRUM * W_STAR**2).sum()
    additive = data_moments(Quantizer("additive", eps), SPECTRUM)
    assert torch.allclose(additive.optimum(W_STAR), SPECTRUM / (SPECTRUM + eps) * W_STAR)
    expected = (SPECTRUM * eps / (SPECTRUM + eps) * W_STAR**2).sum()
    assert additive.approximation_error(SPECTRUM, W_STAR).item() == pytest.approx(expected.item())
    multiplicative = data_moments(Quantizer("multiplicative", eps), SPECTRUM)
    assert torch.allclose(multiplicative.optimum(W_STAR), W_STAR / (1 + eps))
    # the paper's ApproxErr for multiplicative quantization: ε/(1+ε)·‖w*‖²_H
    assert multiplicative.approximation_error(SPECTRUM, W_STAR).item() == pytest.approx(
        eps / (1 + eps) * energy.item()
    )
    assert data_moments(Quantizer(), SPECTRUM).approximation_error(SPECTRUM, W_STAR).item() == pytest.approx(
        0.0
    )
    # the quantized risk is minimal at w^(q), where it equals ApproxErr
    w_q = additive.optimum(W_STAR)
    at_optimum = additive.quantized_risk(w_q, SPECTRUM, W_STAR)
    assert at_optimum.item() == pytest.approx(additive.approximation_error(SPECTRUM, W_STAR).item())
    assert additive.quantized_risk(w_q * 1.01, SPECTRUM, W_STAR) > at_optimum
