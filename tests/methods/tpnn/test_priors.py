"""Subset-size weights, elementary symmetric polynomials and the p_input subset law against brute force."""

from __future__ import annotations

import math
from collections import Counter
from itertools import combinations

import pytest
import torch

from litlab.methods.tpnn.priors import (
    EdgePrior,
    EdgeProposal,
    VariableLaw,
    elementary_symmetric,
    log_subset_prior,
    size_weights,
)


def test_size_weights_follow_the_bart_style_formula() -> None:
    alpha, gamma = 0.95, 1.0
    p_add = [alpha * (1 + d) ** -gamma for d in (1, 2, 3)]
    raw = [1 - p_add[0], p_add[0] * (1 - p_add[1]), p_add[0] * p_add[1] * (1 - p_add[2]), math.prod(p_add)]
    expected = torch.tensor(raw, dtype=torch.float64) / sum(raw)
    assert torch.allclose(size_weights(4, 10, alpha, gamma), expected)
    assert len(size_weights(4, 2, alpha, gamma)) == 2


def test_subset_prior_sums_to_one_over_all_subsets() -> None:
    p, d = 5, 3
    log_w = size_weights(d, p, 0.9, 1.0).log()
    sizes = torch.tensor([len(s) for k in range(1, d + 1) for s in combinations(range(p), k)])
    assert float(log_subset_prior(sizes, log_w, p).exp().sum()) == pytest.approx(1.0)


def test_elementary_symmetric_polynomials_match_brute_force() -> None:
    w = torch.tensor([0.1, 0.4, 0.2, 0.3], dtype=torch.float64)
    e = elementary_symmetric(w, 3)
    for d in range(4):
        brute = sum(math.prod(w[list(s)].tolist()) for s in combinations(range(4), d))
        assert float(e[d]) == pytest.approx(brute)


def test_subset_law_is_proper_and_sampled_as_stated() -> None:
    w = torch.tensor([0.4, 0.3, 0.2, 0.1], dtype=torch.float64)
    law = VariableLaw(w, 3)
    subsets = list(combinations(range(4), 2))
    masks = torch.zeros(len(subsets), 4, dtype=torch.bool)
    for i, s in enumerate(subsets):
        masks[i, list(s)] = True
    probs = law.log_prob_subset(masks).exp()
    assert float(probs.sum()) == pytest.approx(1.0)
    generator = torch.Generator().manual_seed(0)
    counts = Counter(tuple(law.sample_subset(2, generator).tolist()) for _ in range(4000))
    frequency = torch.tensor([counts[s] / 4000 for s in subsets], dtype=torch.float64)
    assert torch.allclose(frequency, probs, atol=0.025)
    excluded = torch.tensor([True, False, False, True])
    one = law.log_prob_one(torch.tensor([1, 2]), excluded).exp()
    assert torch.allclose(one, torch.tensor([0.6, 0.4], dtype=torch.float64))


@pytest.mark.parametrize("law", [EdgePrior(2.0, 0.5), EdgeProposal(-1.0, 0.7)])
def test_edge_laws_sample_their_density(law) -> None:
    """Histogram of sampled log-gamma against the density, and b uniform on [0, 1]."""
    generator = torch.Generator().manual_seed(1)
    b, lg = law.sample((20000,), generator)
    assert float(b.min()) >= 0 and float(b.max()) <= 1 and float(b.mean()) == pytest.approx(0.5, abs=0.01)
    edges = torch.linspace(float(lg.quantile(0.02)), float(lg.quantile(0.98)), 11, dtype=torch.float64)
    mids = 0.5 * (edges[1:] + edges[:-1])
    density = law.log_prob(torch.full_like(mids, 0.5), mids).exp()
    counts = torch.histc(lg, bins=10, min=float(edges[0]), max=float(edges[-1])) / 20000
    assert torch.allclose(counts, density * (edges[1] - edges[0]), atol=0.01)
    assert float(law.log_prob(torch.tensor([1.5]), torch.tensor([0.0]))) == -math.inf
