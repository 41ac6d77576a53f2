"""The paper's claim at CI size: at 50 % unstructured sparsity OBS-Diff (log-decrease timestep weights,
K=4 sequential groups) beats Wanda and magnitude on same-noise image error, on every calibration seed.
Class accuracy does not separate the methods at 50 % (asserted as measured: OBS-Diff stays at the dense
model's accuracy); the class-level results that do hold need more samples than this test can afford and
are stated, not asserted (below).

The test's DiT is the CI recipe (CI_DIT: 500 steps, lr 4e-3, 5 % warm-up then cosine decay to zero;
about 50 s of CPU instead of the studies' 2000 constant-lr steps, about 200 s); on a cold cache the
fixture trains it and the classifier. Calibration seeds 10-12, 8 calibration labels x 20 DDIM steps
(CFG 2), 32 fixed evaluation samples. Dense class accuracy on 256 samples: 0.37 (this recipe, data seed
0) against 0.43 for the studies' DiT.

Margins, from three DiTs trained with this recipe on data seeds 1, 2, 3 (independent data and init):
image-MSE ratio OBS-Diff/Wanda 0.40-0.67 and OBS-Diff/magnitude 0.28-0.56 per seed; OBS-Diff's mean
class accuracy within 0.031 of the dense model's. Checked on models not used for the margins: the test's
own (data seed 0) ratios 0.56-0.59 and 0.61-0.71, data seed 4 0.49-0.51 and 0.69-0.73, accuracy gap 0.00
on both. The limit, 0.9, keeps the studies' DiTs' largest ratio (0.79 over three cold-cache models at
2000 steps) and is below the mutations' on the data-seed-0 model: without the OBS weight update (mask
only) the ratios are 1.51-1.81 to Wanda and 1.82-1.98 to magnitude; with the identity for the Hessian
(data-free OBS, magnitude-like) 1.00 to magnitude, so the test fails (to Wanda alone 0.83-0.91, which
would not fail it). Both mutations, patched into this test, make it fail.

Class accuracy and class agreement with the dense sample, measured properly (python
benchmarks/obsdiff_class_spread.py: 256 evaluation samples, seeds 10-12, this test's calibration, on the
studies' 2000-step DiT "A" and on "B" retrained from a cleared cache;
benchmarks/results/obsdiff_class_spread.json):
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
# A quarter of DEFAULT_DIT's steps, with warm-up and cosine decay (a cache key of its own).
CI_DIT = {"train_steps": 500, "lr": 4.0e-3, "lr_schedule": "warmup_cosine"}
ARMS = {
    "obs_diff": {"method": "obs", "timestep_weighting": "log_decrease", "groups": 4},
    "wanda": {"method": "wanda", "groups": 4},
    "magnitude": {"method": "magnitude"},
}
IMAGE_MSE_RATIO = 0.9  # per seed; largest measured ratio 0.73 over five CI_DIT models (docstring)
CLASS_ACC_BAND = 0.1  # OBS-Diff's class accuracy stays within this of the dense model's (measured <= 0.031)


@pytest.fixture(scope="module")
def trained_targets() -> None:
    """Train and cache the CI DiT and the classifier on a cold cache (this fixture's setup)."""
    fitter = Fitter()
    trained_dit(fitter, CI_DIT)
    trained_classifier(fitter, CI_DIT)


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
        dit=CI_DIT,
    )
    table = runs.pivot(index="seed", columns="arm")
    for baseline in ("wanda", "magnitude"):
        ratio = table["image_mse"]["obs_diff"] / table["image_mse"][baseline]
        assert (ratio < IMAGE_MSE_RATIO).all(), (baseline, ratio.tolist())
    dense_accuracy = extra["dense_metrics"]["class_acc"]
    assert abs(table["class_acc"]["obs_diff"].mean() - dense_accuracy) <= CLASS_ACC_BAND
