"""Claim, CI-sized: 120 MLPs 64-32-10 on digits (the first 100 train the generators, 20 are held out), the
flow with the paper's optimiser for 2000 steps (h = 256), 100 sampled networks (RK4 on 20 points), seed 15,
used for nothing else. Seeds used to choose this size: 0-2 and 7; the margins come from seeds 11-14 at this
size (threshold = mean ∓ 3 sd of the per-seed effect; the values are mean ± sd over the four seeds):

1. zoo-level accuracy, no fine-tuning: acc / zoo acc = 0.970 ± 0.007            -> assert ≥ 0.949
2. canonicalisation helps: acc − raw-weights flow's = 0.046 ± 0.014             -> assert ≥ 0.003
   and the worst network: acc_min − raw's = 0.30 ± 0.07                          -> assert ≥ 0.09
3. more novel than noise-added training networks of equal accuracy (nearest-training-network L2):
   flow − noise = 2.56 ± 0.39                                                    -> assert ≥ 1.39
4. not an interpolation of two training networks or a copy: L2 to the nearest training pair's segment,
   relative to new real networks' = 0.418 ± 0.012                                -> assert ≥ 0.38
What is true against "not a copy" (the paper's critique): the samples sit at about half the distance of new
real networks from the training set, 0.515 ± 0.018 of it (-> assert ≤ 0.57): partial memorisation. Not
asserted at this size (no measured difference over the seeds, see the study): novelty against
interpolations matched to the flow's accuracy (flow − matched: −1.42, −0.01, +0.09, +0.37) and segment
distance against equal-accuracy noise (+0.30 to +1.21: positive on every seed, but within 3 sd of 0).

Measured at seed 15 (load 28, 16 min wall, about 1-2 min of CPU): flow accuracy 0.940, canonicalisation
+0.035 (worst network +0.23), noise margin +2.82, segment ratio 0.449, nearest-distance ratio 0.540.
Mutations (checked by hand, each fails this test): the flow's sampler replaced by interpolations of random
aligned training pairs (fails 4: segment distance 0); canonicalisation removed, ``align_zoo`` returning the
raw zoo (the flow equals its raw-weights ablation: fails 1-2).

The same predicate rejects both ablations and every trivial generator in its place (asserted below): the
raw-weights flow fails 1-2, the flow from a unit-Gaussian source (not the paper's N(0, 0.01² I); the study
measured 0.13 accuracy) fails 1, interpolations fail 4, nearest copies fail 3-4, noise-added networks fail 3.
"""

from __future__ import annotations

import pandas as pd
import pytest

from litlab.datamodules.weights import Zoo
from litlab.methods.deepweightflow.canonical import align_zoo
from litlab.methods.deepweightflow.evaluation import evaluate_generated
from litlab.methods.deepweightflow.training import fit_generator, timed_generation
from litlab.methods.deepweightflow.zoo import train_zoo

SEED, N_NETWORKS, N_TRAIN, STEPS, POINTS = 15, 120, 100, 2000, 20
ACC_RATIO = 0.949  # thresholds: mean ∓ 3 sd over seeds 11-14 (module docstring)
CANON_ACC, CANON_MIN = 0.003, 0.09
NOISE_MARGIN, SEGMENT_RATIO, MEMORISATION_RATIO = 1.39, 0.38, 0.57


def failed_claims(frame: pd.DataFrame, method: str, zoo_acc: float) -> list[str]:
    """The claims (1-4 of the module docstring) that set ``method`` of the evaluation table fails."""
    row, raw, noise, real = (frame.loc[s] for s in (method, "flow_raw", "noise_added", "heldout_real"))
    checks = {
        "1 zoo-level accuracy": row.acc_mean >= ACC_RATIO * zoo_acc,
        "2 canonicalisation helps": row.acc_mean - raw.acc_mean >= CANON_ACC
        and row.acc_min - raw.acc_min >= CANON_MIN,
        "3 beats equal-accuracy noise": row.nn_dist_mean - noise.nn_dist_mean >= NOISE_MARGIN,
        "4 not an interpolation or copy": row.seg_dist_mean >= SEGMENT_RATIO * real.seg_dist_mean,
    }
    return [name for name, passed in checks.items() if not passed]


@pytest.mark.slow
def test_generated_mlps_reach_zoo_accuracy_beat_the_trivial_generators_and_need_canonicalisation() -> None:
    zoo = train_zoo("mlp_64_32_10", "digits", N_NETWORKS, 20, 128, 1e-2, seed=1000 * SEED)
    aligned = align_zoo(zoo)
    generated = {}
    arms = (("flow", aligned, 0.01), ("flow_raw", zoo, 0.01), ("flow_unit_source", aligned, 1.0))
    for name, source, source_std in arms:
        module = fit_generator("flow", source, N_TRAIN, STEPS, hidden=256, seed=SEED, source_std=source_std)
        module.hparams.steps = POINTS
        seconds, accuracy = timed_generation(module, 100, seed=SEED)
        generated[name] = Zoo(module.generate(100, SEED), zoo.arch, zoo.dataset, list(range(100)), accuracy)
        assert seconds < 30  # generous for a shared CI core; the benchmark measures speed
    frame, _ = evaluate_generated(aligned, generated, N_TRAIN, seed=SEED)
    print(frame.to_string())
    zoo_acc = float(zoo.accuracy[:N_TRAIN].mean())
    assert abs(frame.loc["noise_added", "acc_mean"] - frame.loc["flow", "acc_mean"]) < 0.005  # matched

    assert failed_claims(frame, "flow", zoo_acc) == []
    flow, real = frame.loc["flow"], frame.loc["heldout_real"]
    assert flow.nn_dist_mean <= MEMORISATION_RATIO * real.nn_dist_mean  # what is true: partly memorised

    assert {"1 zoo-level accuracy", "2 canonicalisation helps"} <= set(
        failed_claims(frame, "flow_raw", zoo_acc)
    )
    assert "1 zoo-level accuracy" in failed_claims(frame, "flow_unit_source", zoo_acc)
    for trivial in ("interpolation", "interpolation_matched", "nearest_copy"):
        assert "4 not an interpolation or copy" in failed_claims(frame, trivial, zoo_acc), trivial
    assert "3 beats equal-accuracy noise" in failed_claims(frame, "nearest_copy", zoo_acc)
    assert "3 beats equal-accuracy noise" in failed_claims(frame, "noise_added", zoo_acc)
