"""The paper's claim at CI size, on planted3 (friedman1 + 40 x5 x6 x7, p = 10, 600 training rows):
Bayesian-TPNN matches (here: does not lose to) ANOVA-T^2PNN's test RMSE while it finds the three-way
component, which no order-2 model can represent, and its predictive distribution scores a lower CRPS;
without birth/death moves (the ablation) the three-way component is not found and RMSE is far worse.

Seeds 10, 11, 12 were not used for tuning (tuning and exploration used seeds 0-2). Measured on them
(600 iterations, ANOVA-T^2PNN 300 epochs): test RMSE Bayesian-TPNN 1.59 / 1.22 / 1.56 (mean 1.46),
ANOVA-T^2PNN 1.73 / 1.58 / 1.62 (mean 1.65; per-seed difference -0.14 / -0.36 / -0.06, sd 0.15);
birth/death off 3.34 / 2.32 / 2.89; CRPS 0.87 / 0.68 / 0.84 against 0.97 / 0.88 / 0.91 (plug-in
Gaussian with the validation RMSE as sd); third-order selection AUROC 1.0 on every seed (0.5 for the
order-2 model and the ablation). Calibration error (ECE) is NOT better than the plug-in's
(0.038 / 0.021 / 0.063 against 0.025 / 0.038 / 0.032), so it is not asserted; see the README.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from litlab.datamodules.tabular import load_tabular
from litlab.methods.tpnn.estimator import TPNNConfig
from litlab.methods.tpnn.study import run_anova, run_bayesian
from litlab.task import TaskContext

SEEDS = (10, 11, 12)
DATA = {"name": "planted3", "n_samples": 1000, "n_features": 10}
CONFIG = TPNNConfig(n_iter=600, burn_in=300, thin=5)


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, list[dict[str, float]]]:
    torch.set_num_threads(1)
    ctx = TaskContext.local(tmp_path_factory.mktemp("tpnn_claim"))
    out: dict[str, list] = {"tpnn": [], "anova2": [], "no_birth_death": [], "three_way_inclusion": []}
    for seed in SEEDS:
        splits = load_tabular(**DATA, seed=seed)
        model, metrics = run_bayesian(splits, CONFIG, seed, "gbm")
        out["tpnn"].append(metrics)
        three_way = [c for c in model.components() if c.variables == (5, 6, 7)]
        out["three_way_inclusion"].append(three_way[0].inclusion if three_way else 0.0)
        out["no_birth_death"].append(run_bayesian(splits, replace(CONFIG, birth_death=False), seed, "gbm")[1])
        out["anova2"].append(run_anova(ctx, DATA, seed, max_epochs=300)[1])
    return out


def mean(rows: list[dict[str, float]], key: str) -> float:
    return sum(r[key] for r in rows) / len(rows)


@pytest.mark.slow
def test_bayesian_tpnn_matches_the_order_two_model_and_finds_the_three_way_component(runs) -> None:
    tpnn, anova2 = runs["tpnn"], runs["anova2"]
    # RMSE: never more than 0.25 (1.7 sd of the per-seed difference) worse on a seed, not worse on average
    assert mean(tpnn, "rmse") <= mean(anova2, "rmse") + 0.05
    assert all(a["rmse"] <= b["rmse"] + 0.25 for a, b in zip(tpnn, anova2, strict=True))
    # the three-way component ranks first among all 120 triples, and is in most posterior draws
    assert all(r["auroc3"] == 1.0 for r in tpnn)
    assert all(inclusion >= 0.5 for inclusion in runs["three_way_inclusion"])
    # the order-2 model has no triple: its three-way AUROC is chance
    assert all(r["auroc3"] == 0.5 for r in anova2)
    # lower CRPS than the order-2 model's plug-in Gaussian predictive (measured gap 0.13)
    assert mean(tpnn, "crps") < mean(anova2, "crps") - 0.03


@pytest.mark.slow
def test_without_birth_and_death_moves_the_three_way_component_is_missed(runs) -> None:
    tpnn, ablation = runs["tpnn"], runs["no_birth_death"]
    assert all(r["auroc3"] < 1.0 for r in ablation)
    assert mean(ablation, "rmse") > mean(tpnn, "rmse") + 0.5  # measured gap 1.25
