"""The coverage objective against brute force: MaxSim rows, monotone submodularity, and every greedy."""

from __future__ import annotations

import math

import pytest
import torch

from litlab.methods.disco.objective import (
    START,
    average_precision,
    brute_force_best,
    coverage,
    gains,
    greedy,
    jaccard,
    lazy_greedy,
    maxsim_rows,
    stochastic_greedy,
    top_k_maxsim,
)


def random_bags(n_docs: int, dim: int, seed: int, max_len: int = 5) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, max_len + 1, (n_docs,), generator=gen)
    offsets = torch.cat([torch.zeros(1, dtype=torch.long), lengths.cumsum(0)])
    vectors = torch.nn.functional.normalize(torch.randn(int(lengths.sum()), dim, generator=gen), dim=1)
    return vectors, offsets


def brute_coverage(vectors, offsets, queries, subset) -> float:
    """F(S) straight from the definition: the best token of the union of S for each query token."""
    if not subset:
        return START * len(queries)
    union = torch.cat([vectors[offsets[c] : offsets[c + 1]] for c in subset])
    return float((queries @ union.T).max(1).values.sum())


@pytest.fixture
def instance():
    vectors, offsets = random_bags(9, 6, seed=3)
    queries = torch.nn.functional.normalize(
        torch.randn(7, 6, generator=torch.Generator().manual_seed(4)), dim=1
    )
    return vectors, offsets, queries


def test_maxsim_rows_match_the_definition_in_blocks_and_subsets(instance) -> None:
    vectors, offsets, queries = instance
    expected = torch.stack(
        [(vectors[offsets[c] : offsets[c + 1]] @ queries.T).max(0).values for c in range(len(offsets) - 1)]
    )
    torch.testing.assert_close(maxsim_rows(vectors, offsets, queries), expected)
    torch.testing.assert_close(maxsim_rows(vectors, offsets, queries, block_tokens=3), expected)
    docs = torch.tensor([5, 0, 5, 2])
    torch.testing.assert_close(maxsim_rows(vectors, offsets, queries, docs), expected[docs])


def test_coverage_of_a_set_equals_the_union_definition(instance) -> None:
    vectors, offsets, queries = instance
    rows = maxsim_rows(vectors, offsets, queries)
    for subset in ([], [3], [0, 4], [1, 2, 8]):
        assert coverage(rows[subset]) == pytest.approx(
            brute_coverage(vectors, offsets, queries, subset), abs=1e-5
        )


@pytest.mark.parametrize("seed", range(5))
def test_objective_is_monotone_submodular_on_random_instances(seed: int) -> None:
    vectors, offsets = random_bags(12, 5, seed)
    gen = torch.Generator().manual_seed(100 + seed)
    queries = torch.nn.functional.normalize(torch.randn(6, 5, generator=gen), dim=1)
    rows = maxsim_rows(vectors, offsets, queries)
    for _ in range(30):
        order = torch.randperm(12, generator=gen).tolist()
        small, extra, c = order[:2], order[2:5], order[5]
        big = small + extra
        f = {
            name: coverage(rows[s])
            for name, s in [("A", small), ("B", big), ("Ac", small + [c]), ("Bc", big + [c])]
        }
        assert f["A"] <= f["B"] + 1e-6  # monotone
        assert f["Ac"] - f["A"] >= f["Bc"] - f["B"] - 1e-6  # diminishing returns
        state = rows[small].max(0).values.clamp_min(START) if small else torch.full((6,), START)
        assert float(gains(rows[[c]], state)) == pytest.approx(f["Ac"] - f["A"], abs=1e-5)


def brute_greedy(vectors, offsets, queries, k) -> list[int]:
    chosen: list[int] = []
    for _ in range(k):
        values = [
            -math.inf if c in chosen else brute_coverage(vectors, offsets, queries, chosen + [c])
            for c in range(len(offsets) - 1)
        ]
        chosen.append(max(range(len(values)), key=values.__getitem__))
    return chosen


@pytest.mark.parametrize("seed", range(4))
def test_greedy_lazy_and_full_sample_stochastic_agree_with_brute_force(seed: int) -> None:
    vectors, offsets = random_bags(10, 4, seed)
    queries = torch.nn.functional.normalize(
        torch.randn(5, 4, generator=torch.Generator().manual_seed(seed)), dim=1
    )
    rows = maxsim_rows(vectors, offsets, queries)
    expected = brute_greedy(vectors, offsets, queries, 4)
    assert greedy(rows, 4) == expected
    assert lazy_greedy(rows, 4, batch=1) == expected
    assert lazy_greedy(rows, 4, batch=3) == expected
    # ε so small that the sample is every unselected document: stochastic greedy is exact greedy.
    assert stochastic_greedy(lambda d: rows[d], 10, 5, 4, epsilon=1e-9) == expected


@pytest.mark.parametrize("seed", range(3))
def test_greedy_reaches_one_minus_one_over_e_of_the_optimum(seed: int) -> None:
    vectors, offsets = random_bags(10, 3, seed)
    queries = torch.nn.functional.normalize(
        torch.randn(8, 3, generator=torch.Generator().manual_seed(seed)), dim=1
    )
    rows = maxsim_rows(vectors, offsets, queries)
    empty = START * len(queries)
    _, best = brute_force_best(rows, 3)
    assert coverage(rows[greedy(rows, 3)]) - empty >= (1 - 1 / math.e) * (best - empty) - 1e-6


def test_stochastic_greedy_samples_only_what_it_scores() -> None:
    rows = torch.rand(200, 4)
    seen: list[int] = []

    def row_fn(docs: torch.Tensor) -> torch.Tensor:
        seen.extend(docs.tolist())
        return rows[docs]

    picked = stochastic_greedy(row_fn, 200, 4, 5, epsilon=0.5, seed=0)
    assert len(set(picked)) == 5 and set(picked) <= set(seen)
    assert len(seen) == 5 * math.ceil(200 / 5 * math.log(2))


def test_top_k_maxsim_jaccard_and_average_precision() -> None:
    rows = torch.tensor([[0.1, 0.2], [0.9, 0.9], [0.5, 0.4]])
    assert top_k_maxsim(rows, 2) == [1, 2]
    assert jaccard([1, 2, 3], [2, 3, 4]) == pytest.approx(0.5)
    assert average_precision([5, 1, 7, 2], gold=[1, 2]) == pytest.approx((1 / 2 + 2 / 4) / 2)
