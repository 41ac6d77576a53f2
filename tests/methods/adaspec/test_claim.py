"""Claim check (CI-sized): AdaSpec raises ChebNet's accuracy on the small heterophilous WebKB graphs.

The paper's protocol (random 2.5/2.5/95 split, hidden 64, selection on validation loss) with 5 seeds per
graph and half its training budget (500 epochs, patience 100). The paper also reports a gain for GPRGNN;
at our scale we do not measure one (see the method README, 10 seeds at full budget), so it is not
asserted here. ``litlab-run task=adaspec/claim`` runs the full-budget version of this check.
"""

from __future__ import annotations

import math

import hydra
import pytest
from scipy import stats

from litlab.methods.adaspec.benchmark import paired_differences, run_grid

DATASETS = ["texas", "cornell", "wisconsin"]
SEEDS = range(5)


@pytest.mark.slow
def test_adaspec_raises_chebnet_accuracy_on_webkb(compose_config) -> None:
    cfg = compose_config("run", ["task=adaspec/claim"])
    models = {name: hydra.utils.instantiate(cfg.task.models[name]) for name in ("chebnet", "chebnet_adaspec")}
    frame = run_grid(models, DATASETS, SEEDS, max_epochs=500, patience=100)
    paired = paired_differences(frame)
    print(paired.round(2).to_string(index=False))
    wide = frame.pivot_table(index=["dataset", "seed"], columns="model", values="test")
    diff = 100 * (wide["chebnet_adaspec"] - wide["chebnet"])  # 15 paired differences, in points
    lower = diff.mean() - stats.t.ppf(0.95, len(diff) - 1) * diff.std(ddof=1) / math.sqrt(len(diff))
    assert lower > 0, f"AdaSpec − ChebNet = {diff.mean():.2f} points, one-sided 95% lower bound {lower:.2f}"
