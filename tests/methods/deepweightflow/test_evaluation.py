"""The novelty measures and the critique's baselines against direct computations."""

from __future__ import annotations

import itertools

import torch

from litlab.datamodules.weights import classification_data
from litlab.methods.deepweightflow.evaluation import (
    describe,
    ensemble_accuracy,
    error_iou,
    interpolation_baseline,
    matched_interpolation,
    mean_accuracy,
    nearest_copies,
    noise_baseline,
    predictions,
    segment_distance,
)
from litlab.methods.deepweightflow.zoo import train_zoo

ARCH = {"name": "mlp", "sizes": [4, 8, 3]}


def test_error_iou_and_ensemble_match_direct_counts() -> None:
    a = torch.tensor([[1, 1, 0, 0], [0, 0, 0, 0], [1, 0, 1, 0]], dtype=torch.bool)
    b = torch.tensor([[1, 0, 1, 0], [0, 0, 0, 0], [1, 0, 1, 0]], dtype=torch.bool)
    torch.testing.assert_close(error_iou(a, b), torch.tensor([1 / 3, 1.0, 1.0]))
    probs = torch.tensor([[[0.9, 0.1], [0.6, 0.4]], [[0.2, 0.8], [0.0, 1.0]]])  # (2 nets, 2 samples, 2)
    assert ensemble_accuracy(probs, torch.tensor([0, 1]), 2) == 1.0  # means [0.55, 0.45], [0.3, 0.7]
    assert ensemble_accuracy(probs, torch.tensor([0, 1]), 1) == 0.5


def test_interpolations_lie_between_distinct_pairs() -> None:
    params = {"w": torch.arange(5.0).reshape(5, 1) * 10}
    mixed = interpolation_baseline(params, 200, seed=0)["w"][:, 0]
    fractional = (mixed / 10) % 1
    assert torch.all((fractional >= 0.3 - 1e-6) | (fractional <= 0.7 + 1e-6))
    assert torch.all(mixed % 10 != 0)  # never a copy of a member


def test_copies_of_training_networks_are_flagged_and_noise_matches_accuracy() -> None:
    zoo = train_zoo(ARCH, "iris", 12, 30, 16, 1e-2, 0)
    data = classification_data("iris")
    wrong = predictions(ARCH, zoo.params, data.x_test).argmax(-1) != data.y_test
    row = describe(ARCH, zoo.params, zoo.params, wrong, data, ensemble_sizes=(4,))
    assert row["nn_dist_mean"] == 0.0 and row["seg_dist_mean"] == 0.0 and row["error_iou_nn"] == 1.0
    assert abs(row["acc_mean"] - float(zoo.accuracy.mean())) < 1e-6
    target = float(zoo.accuracy.mean()) - 0.15
    noisy, sigma = noise_baseline(ARCH, zoo.params, target, data)
    accuracy = (predictions(ARCH, noisy, data.x_test).argmax(-1) == data.y_test).float().mean()
    assert sigma > 0 and abs(float(accuracy) - target) < 0.03


def test_segment_distance_matches_brute_force_and_is_zero_on_interpolations() -> None:
    generator = torch.Generator().manual_seed(0)
    x, train = torch.randn(9, 6, generator=generator), torch.randn(7, 6, generator=generator)
    grid = torch.linspace(0, 1, 2001)
    brute = torch.tensor(
        [
            min(
                float((xi - (train[i] + grid[:, None] * (train[j] - train[i]))).norm(dim=1).min())
                for i, j in itertools.permutations(range(len(train)), 2)
            )
            for xi in torch.cat([x, train[:1]])
        ],
        dtype=torch.float64,
    )
    ours = segment_distance(torch.cat([x, train[:1]]), train)
    torch.testing.assert_close(ours, brute, atol=2e-3, rtol=0)  # the grid's resolution
    assert ours[-1] == 0  # a copy lies on every segment from itself
    mixed = interpolation_baseline({"w": train}, 20, seed=1)["w"]
    assert float(segment_distance(mixed, train).max()) < 1e-5


def test_matched_baselines_reach_the_target_accuracy_and_copies_are_nearest() -> None:
    zoo = train_zoo(ARCH, "iris", 12, 30, 16, 1e-2, 0)
    data = classification_data("iris")
    midpoints = interpolation_baseline(zoo.params, 40, seed=0, alpha=(0.5, 0.5))
    target = (float(zoo.accuracy.mean()) + mean_accuracy(ARCH, midpoints, data)) / 2
    mixed, alpha = matched_interpolation(ARCH, zoo.params, 40, target, data)
    assert 0 < alpha < 0.5 and abs(mean_accuracy(ARCH, mixed, data) - target) < 0.03
    shifted = {k: v[[3, 7]] + 1e-3 for k, v in zoo.params.items()}
    copies = nearest_copies(shifted, zoo.params)
    for k in zoo.params:
        assert torch.equal(copies[k], zoo.params[k][[3, 7]])
