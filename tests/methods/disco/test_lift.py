"""The lift and the hinge map: their identities, and the R-bit sign codes the index stores."""

from __future__ import annotations

import pytest
import torch

from litlab.methods.disco.lift import agreeing, hinge, hyperplanes, lift_corpus, lift_queries, sign_codes


def test_lifted_product_is_the_gain_term() -> None:
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(5, 8, generator=gen) * 3
    q = torch.nn.functional.normalize(torch.randn(4, 8, generator=gen), dim=1)
    state = torch.randn(4, generator=gen)
    expected = q @ torch.nn.functional.normalize(x, dim=1).T - state[:, None]
    torch.testing.assert_close(lift_queries(q, state) @ lift_corpus(x).T, expected)


def test_hinge_keeps_the_product_when_signs_agree_and_zeroes_it_otherwise() -> None:
    gen = torch.Generator().manual_seed(1)
    u, v, w = (
        torch.randn(50, 6, generator=gen),
        torch.randn(60, 6, generator=gen),
        torch.randn(6, generator=gen),
    )
    agree = (u @ w >= 0)[:, None] == (v @ w >= 0)[None, :]
    torch.testing.assert_close(hinge(u, w) @ hinge(v, w).T, torch.where(agree, u @ v.T, torch.zeros(())))
    assert agree.any() and (~agree).any()


def test_sign_codes_hold_one_bit_per_hyperplane_and_agreeing_tests_any_usable_bit() -> None:
    planes = hyperplanes(5, 4, seed=2)
    u = torch.randn(30, 4, generator=torch.Generator().manual_seed(3))
    codes = sign_codes(u, planes)
    for r in range(5):
        assert torch.equal((codes >> r) & 1, (u @ planes[r] >= 0).int())
    a, b = torch.tensor([0b101]), torch.tensor([0b010])
    assert not agreeing(a, b, torch.tensor([0b111])).item()  # every bit differs
    assert agreeing(a, torch.tensor([0b011]), torch.tensor([0b111])).item()
    assert not agreeing(a, torch.tensor([0b011]), torch.tensor([0b100])).item()  # only a differing bit usable


def test_max_over_replicas_recovers_the_positive_part_with_high_probability() -> None:
    """With R = 8 a positive lifted product survives unless all 8 signs disagree (< 2^-8 each)."""
    gen = torch.Generator().manual_seed(4)
    x = lift_corpus(torch.randn(400, 16, generator=gen))
    q = lift_queries(
        torch.nn.functional.normalize(torch.randn(30, 16, generator=gen), dim=1), torch.zeros(30)
    )
    planes = hyperplanes(8, 17, seed=5)
    estimate = torch.stack([hinge(q, w) @ hinge(x, w).T for w in planes]).amax(0)
    truth = q @ x.T
    positive = truth > 0
    exact = torch.isclose(estimate, truth, atol=1e-5) | (~positive & (estimate.abs() < 1e-6))
    assert exact[positive].float().mean() > 0.99
    assert (estimate >= torch.minimum(truth, torch.zeros(())) - 1e-5).all()


def test_hyperplanes_are_seeded_and_bounded() -> None:
    assert torch.equal(hyperplanes(3, 4, 7), hyperplanes(3, 4, 7))
    with pytest.raises(ValueError, match="replicas"):
        hyperplanes(31, 4, 0)
