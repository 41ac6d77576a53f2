"""The observation measures: recorded tile importance is a proper pooled softmax at every dense step, and the
cross-head / cross-step cosines behave on constructed maps; the arm metrics count what they say."""

from __future__ import annotations

import torch

from litlab.lm import build_lm, llama_config
from litlab.methods.sparsed.analysis import observations, record_importance
from litlab.methods.sparsed.evaluation import arm_metrics, swap_values


def test_recorded_importance_covers_every_step_layer_and_head() -> None:
    torch.manual_seed(0)
    config = llama_config(
        40, hidden_size=32, num_layers=2, num_heads=2, mask_token_id=2, initializer_range=0.3
    )
    model = build_lm(config, "masked_diffusion").eval()
    prompts = torch.randint(3, 40, (2, 48), generator=torch.Generator().manual_seed(0))
    importance = record_importance(model, prompts, 16, 4, block=16)
    assert importance.shape == (4, 2, 2, 2, 4, 4)
    torch.testing.assert_close(importance.sum(-1) * 16, torch.ones(4, 2, 2, 2, 4), atol=1e-5, rtol=0)
    assert not torch.equal(importance[0], importance[-1])  # the answer's tokens changed the maps


def test_observations_on_constructed_maps() -> None:
    base = torch.rand(4, 4, generator=torch.Generator().manual_seed(1))
    same = base.expand(5, 2, 1, 3, 4, 4)  # (T, layers, B, H, n, n): equal heads, constant over steps
    seen = observations(same, select_at=1)
    assert (
        abs(seen["cross_head_cosine"] - 1) < 1e-6 and abs(seen["cross_step_cosine_after_select"] - 1) < 1e-6
    )
    disjoint = torch.eye(3).repeat_interleave(4, 1).view(3, 2, 6)  # three heads on disjoint tiles
    seen = observations(disjoint.expand(2, 1, 1, 3, 2, 6), select_at=0)
    assert abs(seen["cross_head_cosine"]) < 1e-6
    assert seen["cross_step_cosine"] == [1.0, 1.0]


def test_arm_metrics_count_agreement_and_accuracy() -> None:
    dense = torch.tensor([[1, 2, 3, 4], [5, 6, 7, 8]])
    generated = torch.tensor([[1, 2, 3, 4], [5, 6, 0, 8]])
    answers = torch.tensor([[1, 2, 3, 4], [0, 0, 0, 0]])
    metrics = arm_metrics(generated, dense, answers)
    assert metrics == {
        "agreement": 7 / 8,
        "exact_match_dense": 0.5,
        "token_accuracy": 5 / 8,
        "exact_match": 0.5,
    }


def test_a_generation_of_the_other_key_scores_as_swapped_not_right() -> None:
    answers = torch.tensor([[1, 2, 3, 4], [5, 6, 7, 8]])  # two values of two tokens each
    assert swap_values(answers).tolist() == [[3, 4, 1, 2], [7, 8, 5, 6]]
    generated = torch.tensor([[3, 4, 1, 2], [5, 6, 7, 0]])  # row 0 answers the keys in the wrong order
    metrics = arm_metrics(generated, generated, answers, swap_values(answers))
    assert metrics["token_accuracy"] == 3 / 8 and metrics["swapped_token_accuracy"] == 4 / 8
