"""The objective's kernel form against the d×d covariance, and exact greedy against brute-force greedy."""

import pytest
import torch

from litlab.methods.datamask.baselines import greedy_select, random_select, topk_quality
from litlab.methods.datamask.objective import mask_objective, second_moment_kernel, subset_objective


def _pool(n: int, d: int = 5, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    emb = torch.randn(n, d, generator=gen, dtype=torch.float64)
    return torch.rand(n, generator=gen, dtype=torch.float64), emb / emb.norm(dim=1, keepdim=True)


def test_mask_objective_matches_covariance_norm():
    quality, emb = _pool(12)
    masks = (torch.rand(7, 12, generator=torch.Generator().manual_seed(3)) < 0.5).double()
    values = mask_objective(masks, quality, second_moment_kernel(emb), 0.3, 0.7, 0.25, 12)
    for mask, value in zip(masks, values):
        chosen = mask.bool()
        moment = emb[chosen].T @ emb[chosen] / mask.sum()
        expected = 0.3 * quality[chosen].mean() - 0.7 * torch.linalg.matrix_norm(moment)
        expected -= 0.7 * (mask.sum() / 12 - 0.25) ** 2
        assert value.item() == pytest.approx(expected.item(), abs=1e-12)
        sub = subset_objective(chosen.nonzero().flatten(), quality, emb, 0.3)
        assert sub["objective"] == pytest.approx((expected + 0.7 * (mask.sum() / 12 - 0.25) ** 2).item())


def test_diversity_norm_bounds():
    """D = 1 for identical documents and 1/√d for an orthonormal basis (the trace is always 1)."""
    same = torch.ones(6, 4) / 2
    assert subset_objective(torch.arange(6), torch.zeros(6), same, 0.0)["diversity_norm"] == pytest.approx(1)
    basis = torch.eye(4)
    assert subset_objective(torch.arange(4), torch.zeros(4), basis, 0.0)["diversity_norm"] == pytest.approx(
        0.5
    )


def test_empty_mask_scores_only_the_budget_penalty():
    quality, emb = _pool(5)
    value = mask_objective(
        torch.zeros(1, 5, dtype=torch.float64), quality, second_moment_kernel(emb), 0.5, 2.0, 0.4, 5
    )
    assert value.item() == pytest.approx(-2.0 * 0.16)


@pytest.mark.parametrize("lam", [0.0, 0.4, 1.0])
def test_greedy_matches_brute_force_greedy(lam):
    """Each incremental pick equals the argmax of subset_objective over every remaining candidate."""
    quality, emb = _pool(30, seed=2)
    fast = greedy_select(quality, emb, 0.3, lam, seed=5).indices.tolist()
    chosen: list[int] = []
    for step in range(9):
        rest = [i for i in range(30) if i not in chosen]
        values = torch.tensor(
            [subset_objective(torch.tensor(chosen + [i]), quality, emb, lam)["objective"] for i in rest],
            dtype=torch.float64,
        )
        best = values.max()
        assert subset_objective(torch.tensor(chosen + [fast[step]]), quality, emb, lam)[
            "objective"
        ] == pytest.approx(best.item(), abs=1e-12)
        chosen.append(fast[step])


def test_baselines_hold_the_budget():
    quality, emb = _pool(101)
    for selection in (
        topk_quality(quality, 0.1),
        random_select(101, 0.1),
        greedy_select(quality, emb, 0.1, 0.5),
    ):
        assert len(selection.indices) == 10 == len(set(selection.indices.tolist()))
    assert set(topk_quality(quality, 0.1).indices.tolist()) == set(quality.argsort()[-10:].tolist())
