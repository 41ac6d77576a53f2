"""Claim, CI-sized: a flow trained on 100 re-based MLPs (64-32-10, digits) samples networks that reach
≥ 90% of the zoo's mean accuracy with no fine-tuning, and they are not copies: no sample sits on a training
network, and on average they are farther from their nearest one than noise-added copies of equal accuracy.
(Their error overlap with that network is not lower than the noise baseline's; the README reports it.)"""

from __future__ import annotations

import pytest
import torch

from litlab.datamodules.weights import Zoo
from litlab.methods.deepweightflow.canonical import align_zoo
from litlab.methods.deepweightflow.evaluation import evaluate_generated
from litlab.methods.deepweightflow.study import fit_generator, timed_generation
from litlab.methods.deepweightflow.zoo import train_zoo

N_TRAIN, STEPS = 100, 600


@pytest.mark.slow
def test_generated_mlps_reach_zoo_accuracy_and_are_not_copies() -> None:
    zoo = align_zoo(train_zoo({"name": "mlp", "sizes": [64, 32, 10]}, "digits", 120, 20, 128, 1e-2, seed=0))
    module = fit_generator("flow", zoo, N_TRAIN, STEPS, hidden=256, seed=0)
    seconds, accuracy = timed_generation(module, 100, seed=0)
    zoo_mean = float(zoo.accuracy[:N_TRAIN].mean())
    assert float(accuracy.mean()) >= 0.9 * zoo_mean, (float(accuracy.mean()), zoo_mean)
    assert seconds < 30  # generous for a shared CI core; the benchmark measures the 5 s target

    params = module.generate(100, seed=0)
    generated = Zoo(params, zoo.arch, zoo.dataset, list(range(100)), accuracy, True, 0)
    frame, _ = evaluate_generated(zoo, {"flow": generated}, N_TRAIN, seed=0)
    flow, noise = frame.loc["flow"], frame.loc["noise_added"]
    assert abs(noise["acc_mean"] - flow["acc_mean"]) < 0.02  # the noise baseline is matched in accuracy
    assert flow["nn_dist_min"] > 0.05 * frame.loc["heldout_real", "nn_dist_mean"]  # no sample is a copy
    assert flow["nn_dist_mean"] > noise["nn_dist_mean"]
    print(frame.to_string())  # error overlap is reported, not asserted: see the README (it is not lower)
    assert torch.isfinite(accuracy).all()
