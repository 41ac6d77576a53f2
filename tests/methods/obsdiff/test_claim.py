"""The paper's claim at CI size: at 50 % unstructured sparsity OBS-Diff (log-decrease timestep weights,
K=4 sequential groups) beats Wanda and magnitude on same-noise image error, on every calibration seed.
Class accuracy does not separate the methods at 50 % (asserted as measured: OBS-Diff stays at the dense
model's accuracy); the class-level results that do hold need more samples than this test can afford and
are stated, not asserted (below).

Cached tiny DiT (trained on first use, about 5 min of CPU), calibration seeds 10-12 (margins were set on
seeds 0-2 with this same setting; nothing was tuned on 10-12), 8 calibration labels x 20 DDIM steps
(CFG 2), 32 fixed evaluation samples. Seeds 0-2 measured: image-MSE ratio OBS-Diff/Wanda 0.47-0.58,
OBS-Diff/magnitude 0.43-0.50 per seed.

Training the DiT is not bit-reproducible across runs, and a cold cache trains a different model: on seeds
10-12 the CI replica's freshly trained DiT gave ratios to Wanda 0.74-0.79 and to magnitude 0.59-0.63; a
model retrained with the cache cleared ("model B" of benchmarks/obsdiff_class_spread.py, 256 evaluation
samples) 0.72-0.75 and 0.73-0.78. The limit, 0.9, is above the largest ratio of all three models and below
the mutations' (no OBS update: 1.00-1.13; identity Hessian: 1.09-1.16).

Class accuracy and class agreement with the dense sample, measured properly (python
benchmarks/obsdiff_class_spread.py: 256 evaluation samples, seeds 10-12, this test's calibration, on the
cached DiT "A" and on "B" retrained from a cleared cache; benchmarks/results/obsdiff_class_spread.json):
- class accuracy at 50 %: OBS-Diff loses to Wanda on both models (per-seed gains -0.012 to -0.055) and
  to magnitude on A (-0.07 to -0.09), beats magnitude on B (+0.008 to +0.035). The baselines drift above
  the dense model's accuracy (0.41-0.42) while OBS-Diff stays within 0.035 of it. Not reproduced.
- class accuracy at 60 %: OBS-Diff beats Wanda (+0.016 to +0.070) and magnitude (+0.050 to +0.074) on
  every seed of both models; the smallest gain, 0.016, is 4 samples in 256 and half a sample at this
  test's 32, so it is not asserted here.
- class agreement at 50 %: OBS-Diff beats Wanda (+0.031 to +0.082) and magnitude (+0.055 to +0.102) on
  every seed of both models; at 32 samples a third retrained DiT gave only +0.021 over Wanda, under one
  sample, so it is not asserted here. At 60 % it reverses on B against Wanda (-0.059 to -0.070).
"""

from __future__ import annotations

import pytest

from litlab.fitting import Fitter
from litlab.methods.obsdiff.study import run_arms
from litlab.methods.obsdiff.targets import trained_classifier, trained_dit
from litlab.task import TaskContext

SEEDS = [10, 11, 12]
ARMS = {
    "obs_diff": {"method": "obs", "timestep_weighting": "log_decrease", "groups": 4},
    "wanda": {"method": "wanda", "groups": 4},
    "magnitude": {"method": "magnitude"},
}
IMAGE_MSE_RATIO = 0.9  # per seed; largest measured ratio 0.79 over three trained models (docstring)
CLASS_ACC_BAND = 0.1  # OBS-Diff's class accuracy stays within this of the dense model's (measured <= 0.035)


@pytest.fixture(scope="module")
def trained_targets() -> None:
    """Train and cache the dense DiT and the classifier on a cold cache (this fixture's setup)."""
    fitter = Fitter()
    trained_dit(fitter, None)
    trained_classifier(fitter, None)


@pytest.mark.slow
def test_obs_diff_beats_wanda_and_magnitude_at_half_sparsity(tmp_path, trained_targets: None) -> None:
    runs, extra = run_arms(
        TaskContext.local(tmp_path),
        ARMS,
        SEEDS,
        [0.5],
        n_calibration=8,
        steps=20,
        guidance=2.0,
        eval_samples=32,
        dit=None,
    )
    table = runs.pivot(index="seed", columns="arm")
    for baseline in ("wanda", "magnitude"):
        ratio = table["image_mse"]["obs_diff"] / table["image_mse"][baseline]
        assert (ratio < IMAGE_MSE_RATIO).all(), (baseline, ratio.tolist())
    dense_accuracy = extra["dense_metrics"]["class_acc"]
    assert abs(table["class_acc"]["obs_diff"].mean() - dense_accuracy) <= CLASS_ACC_BAND
