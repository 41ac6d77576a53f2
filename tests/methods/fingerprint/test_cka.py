"""Unbiased CKA against the closed-form HSIC_u estimator, its null behaviour, and the biased form."""

from __future__ import annotations

import pytest
import torch

from litlab.methods.fingerprint.cka import cka_biased, cka_unbiased, gram, hsic_unbiased, u_centre


def _brute_hsic_u(k: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
    """Song et al.'s estimator as the U-statistic over distinct index 4-tuples (tiny n only)."""
    n = k.shape[0]
    total = torch.zeros((), dtype=k.dtype)
    idx = torch.arange(n)
    for i in range(n):
        for j in range(n):
            if i == j:
                continue
            others = idx[(idx != i) & (idx != j)]
            # E[k_ij l_ij] + E[k_ij] E[l_qr] - 2 E[k_ij l_iq] over distinct indices
            total += k[i, j] * m[i, j]
            total -= 2 * (k[i, j] * m[i, others]).sum() / (n - 2)
            pairs = [(q, r) for q in others for r in others if q != r]
            total += k[i, j] * sum(m[q, r] for q, r in pairs) / ((n - 2) * (n - 3))
    return total / (n * (n - 1))


def test_u_centring_equals_closed_form_hsic() -> None:
    g = torch.Generator().manual_seed(0)
    x, y = (
        torch.randn(9, 5, generator=g, dtype=torch.float64),
        torch.randn(9, 7, generator=g, dtype=torch.float64),
    )
    k, m = x @ x.T, y @ y.T
    n = k.shape[0]
    via_centring = (u_centre(k) * u_centre(m)).sum() / (n * (n - 3))
    torch.testing.assert_close(via_centring, hsic_unbiased(k, m), rtol=1e-10, atol=1e-12)
    expected = hsic_unbiased(k, m) / (hsic_unbiased(k, k) * hsic_unbiased(m, m)).sqrt()
    torch.testing.assert_close(cka_unbiased(k, m), expected, rtol=1e-10, atol=1e-12)


def test_closed_form_equals_u_statistic() -> None:
    g = torch.Generator().manual_seed(1)
    x, y = (
        torch.randn(7, 3, generator=g, dtype=torch.float64),
        torch.randn(7, 4, generator=g, dtype=torch.float64),
    )
    k, m = x @ x.T, y @ y.T
    torch.testing.assert_close(hsic_unbiased(k, m), _brute_hsic_u(k, m), rtol=1e-9, atol=1e-12)


def test_unbiased_is_near_zero_for_independent_wide_matrices_where_biased_is_not() -> None:
    g = torch.Generator().manual_seed(2)
    d, features = 256, 512
    a = torch.randn(features, d, generator=g, dtype=torch.float64)
    b = torch.randn(features, d, generator=g, dtype=torch.float64)
    unbiased = cka_unbiased(gram(a), gram(b)).item()
    biased = cka_biased(gram(a), gram(b)).item()
    assert abs(unbiased) < 0.01, unbiased  # sd ≈ 1/d under independence
    assert biased > 0.2, biased  # the inflation the unbiased form removes


def test_invariances_and_identity() -> None:
    g = torch.Generator().manual_seed(3)
    w = torch.randn(48, 32, generator=g, dtype=torch.float64)
    rotation, _ = torch.linalg.qr(torch.randn(48, 48, generator=g, dtype=torch.float64))
    assert cka_unbiased(gram(w), gram(3.0 * rotation @ w)).item() == pytest.approx(1.0, abs=1e-12)
    assert cka_biased(gram(w), gram(w)).item() == pytest.approx(1.0, abs=1e-12)


def test_too_few_samples_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 4"):
        u_centre(torch.eye(3))
