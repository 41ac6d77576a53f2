"""Quantizers: unbiased where the paper says so (Monte Carlo), variance within ε, exact identity at ε = 0,
stochastic rounding on the right grid, real casts equal to torch's, and exact conditional moments."""

from __future__ import annotations

import math

import pytest
import torch

from litlab.methods.quantsgd.quantizers import (
    CASTS,
    KINDS,
    NOISE,
    STOCHASTIC,
    Quantizer,
    cast_eps,
    conditional_moments,
    fp_eps,
    int_eps,
    mantissa_bits,
    quantize,
)

X = torch.tensor([-3.7, -0.8, -0.013, 0.0, 0.002, 0.31, 1.0, 2.45, 17.0], dtype=torch.float64)
N_MC = 200_000


def _draws(kind: str, n: int, seed: int = 0) -> torch.Tensor:
    """n standard draws per value of X: (n, len(X))."""
    generator = torch.Generator().manual_seed(seed)
    draw = torch.randn if NOISE[kind] == "normal" else torch.rand
    return draw(n, len(X), generator=generator, dtype=torch.float64)


@pytest.mark.parametrize("kind", STOCHASTIC)
@pytest.mark.parametrize("eps", [1e-3, 0.04])
def test_stochastic_quantizers_are_unbiased_with_variance_at_most_eps(kind: str, eps: float) -> None:
    q = quantize(X.expand(N_MC, -1), kind, eps, _draws(kind, N_MC))
    variance = q.var(0)
    bound = eps * X**2 if kind in ("multiplicative", "fp") else torch.full_like(X, eps)
    standard_error = (variance / N_MC).sqrt()
    assert ((q.mean(0) - X).abs() <= 5 * standard_error + 1e-15).all(), (q.mean(0) - X) / standard_error
    # the sample variance of a bounded (two-point) or Gaussian error is within ~2% of its expectation here
    assert (variance <= 1.03 * bound + 1e-300).all()


@pytest.mark.parametrize("kind", STOCHASTIC)
def test_conditional_moments_match_monte_carlo(kind: str) -> None:
    eps = 0.02
    q = quantize(X.expand(N_MC, -1), kind, eps, _draws(kind, N_MC, seed=1))
    first, second, fourth = conditional_moments(X, kind, eps)
    assert torch.equal(first, X)
    for moment, sample in ((second, q**2), (fourth, q**4)):
        error = (sample.mean(0) - moment).abs()
        assert (error <= 5 * (sample.var(0) / N_MC).sqrt() + 1e-12).all(), error


def test_stochastic_rounding_lands_on_the_grid() -> None:
    eps = int_eps(4, 2.0)
    step = 2 * math.sqrt(eps)
    q = quantize(X.expand(1000, -1), "int", eps, _draws("int", 1000))
    assert torch.allclose(q / step, (q / step).round(), atol=1e-9)
    assert ((q - X).abs() < step).all()
    m = 3
    q = quantize(X.expand(1000, -1), "fp", fp_eps(m), _draws("fp", 1000))
    nonzero = q[q != 0]
    mantissa, _ = torch.frexp(nonzero)  # mantissa ∈ [0.5, 1): 1 + m bits after the point
    assert torch.equal(mantissa * 2 ** (m + 1), (mantissa * 2 ** (m + 1)).round())


def test_eps_helpers_are_the_variance_bounds() -> None:
    assert fp_eps(3) == pytest.approx(0.25 * 4.0**-3)
    assert int_eps(8, 4.0) == pytest.approx((8.0 / 255) ** 2 / 4)
    assert mantissa_bits(torch.tensor([fp_eps(3), fp_eps(7), 0.01, 0.0])).tolist() == [3, 7, 3, math.inf]
    assert cast_eps("bf16") == 4.0**-8
    assert Quantizer("fp8_e4m3").eps == cast_eps("fp8_e4m3")


@pytest.mark.parametrize("kind", KINDS)
def test_eps_zero_is_the_exact_identity(kind: str) -> None:
    noise = _draws(kind, 3) if kind in NOISE else None
    x = X.expand(3, -1)
    assert torch.equal(quantize(x, kind, torch.zeros(3, 1, dtype=torch.float64), noise), x)


@pytest.mark.parametrize("kind", list(CASTS))
def test_casts_round_to_nearest_within_their_relative_precision(kind: str) -> None:
    dtype, bits = CASTS[kind]
    normal = X[(X.abs() > 0.02) & (X.abs() < 400)]  # normal range of every format (e4m3: 2^-6 .. 448)
    q = quantize(normal, kind, cast_eps(kind), None)
    assert torch.equal(q, normal.to(dtype).to(torch.float64))
    assert ((q - normal).abs() <= 2.0 ** -(bits + 1) * normal.abs()).all()


def test_quantizer_validation() -> None:
    with pytest.raises(ValueError, match="unknown quantizer kind"):
        Quantizer("int3")
    with pytest.raises(ValueError, match="eps"):
        Quantizer("additive", -1.0)
    with pytest.raises(ValueError, match="eps=0"):
        Quantizer("none", 0.1)
    assert not Quantizer("additive", 0.0).active
    assert Quantizer("fp8_e5m2").multiplicative and not Quantizer("fp8_e5m2").unbiased
    assert not Quantizer("int", 0.1).multiplicative
    with pytest.raises(ValueError, match="noise"):
        quantize(X, "additive", 0.1, None)
