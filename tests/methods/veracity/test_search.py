"""Veracity Search: an oracle scorer's planted labels are recovered, and the Metropolis search finds the
exhaustive optimum on short chains."""

from __future__ import annotations

import torch

from litlab.datamodules.prontoqa import ProblemConfig, generate_problems
from litlab.methods.veracity.metrics import first_error, step_metrics
from litlab.methods.veracity.scoring import lm_score_fn
from litlab.methods.veracity.search import (
    all_assignments,
    exhaustive_search,
    metropolis_search,
    veracity_search,
)


def _oracle(labels: torch.Tensor):
    """A scorer whose reward is the log-likelihood of a noisy (10 %) observation of the planted labels."""
    valid = labels >= 0

    def score(rows: torch.Tensor, assignments: torch.Tensor) -> torch.Tensor:
        agree = (assignments == (labels[rows] == 1)[:, None]) & valid[rows][:, None]
        disagree = (assignments != (labels[rows] == 1)[:, None]) & valid[rows][:, None]
        return agree.sum(-1) * torch.tensor(0.9).log() + disagree.sum(-1) * torch.tensor(0.1).log()

    return score


def _random_scorer(width: int, seed: int):
    """A non-separable reward: per-step weights plus pairwise interactions, drawn per chain."""
    generator = torch.Generator().manual_seed(seed)
    unary = torch.randn(512, width, generator=generator)
    pair = torch.randn(512, width, width, generator=generator)

    def score(rows: torch.Tensor, assignments: torch.Tensor) -> torch.Tensor:
        v = assignments.float()
        return (v * unary[rows][:, None]).sum(-1) + torch.einsum("bki,bij,bkj->bk", v, pair[rows], v)

    return score


def test_all_assignments_are_distinct_and_padded() -> None:
    a = all_assignments(3, 5)
    assert a.shape == (8, 5) and len({tuple(r.tolist()) for r in a}) == 8 and a[:, 3:].all()


def test_oracle_scorer_recovers_planted_labels() -> None:
    batch = generate_problems(200, ProblemConfig(depth_min=2, depth_max=7), seed=2)
    width = batch["slots"].shape[1]
    for result in (
        exhaustive_search(_oracle(batch["labels"]), batch["n_steps"], width),
        veracity_search(
            _oracle(batch["labels"]), batch["n_steps"], width, exhaustive_max_steps=4, iterations=64
        ),
    ):
        assert step_metrics(result.assignment, batch["labels"])["step_accuracy"] == 1.0


def test_search_equals_exhaustive_on_short_chains() -> None:
    n_steps = torch.randint(1, 5, (512,), generator=torch.Generator().manual_seed(0))
    score = _random_scorer(4, 0)
    exact = exhaustive_search(score, n_steps, 4)
    found = metropolis_search(score, n_steps, 4, iterations=48, restarts=4, seed=1)
    assert torch.equal(found.assignment, exact.assignment)
    assert torch.allclose(found.score, exact.score)
    assert (found.scored == 4 * 49).all() and torch.equal(exact.scored, 2**n_steps)


def test_search_equals_exhaustive_with_an_lm_scorer(tiny_lm) -> None:
    batch = generate_problems(12, ProblemConfig(depth_min=2, depth_max=3), seed=9)
    score = lm_score_fn(tiny_lm, batch)
    width = batch["slots"].shape[1]
    exact = exhaustive_search(score, batch["n_steps"], width)
    found = metropolis_search(score, batch["n_steps"], width, iterations=40, restarts=4, seed=0)
    assert torch.equal(found.assignment, exact.assignment)


def test_metrics_by_hand() -> None:
    labels = torch.tensor([[1, 0, 1, -1], [1, 1, 1, 1], [0, 1, 0, -1]])
    predicted = torch.tensor([[1, 0, 0, 1], [1, 1, 1, 1], [1, 1, 0, 1]]).bool()
    m = step_metrics(predicted, labels)
    # flagged: (0,1) (0,2) (2,2) -> hits (0,1) (2,2); gold false: (0,1) (2,0) (2,2)
    assert m["precision"] == 2 / 3 and m["recall"] == 2 / 3 and abs(m["f1"] - 2 / 3) < 1e-12
    assert m["step_accuracy"] == 8 / 10
    assert first_error(predicted, labels >= 0).tolist() == [1, 4, 2]
    assert abs(m["localisation"] - 2 / 3) < 1e-6
