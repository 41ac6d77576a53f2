"""The tasks return the results schema (tiny settings; the numbers themselves are the claim test's job)."""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import torch

from litlab.core.results import check_task_output, table_rows
from litlab.methods.tpnn.study import fit, study
from litlab.task import TaskContext

TINY = {"n_iter": 12, "burn_in": 6, "thin": 2, "initial_nodes": 3}


def test_study_returns_every_table_and_the_ablation_arms(tmp_path) -> None:
    torch.set_num_threads(1)
    ctx = TaskContext.local(tmp_path)
    out = check_task_output(
        study(
            ctx,
            seeds=[0],
            sets=["planted3"],
            peer_sets=[],
            n_samples=120,
            model=TINY,
            importance="uniform",
            anova_epochs=2,
        ),
        "tpnn/study",
    )
    runs = table_rows(out["tables"]["runs"])
    arms = {"tpnn", "no_birth_death", "no_stepwise", "uniform_p_input", "anova2"}
    assert {r["method"] for r in runs} == arms
    assert all(math.isfinite(r["rmse"]) and 0 <= r["auroc3"] <= 1 for r in runs)
    assert {r["method"] for r in table_rows(out["tables"]["paper_vs_ours"])} >= {"tpnn", "anova2"}
    assert "planted3/tpnn/rmse" in out["metrics"] and "components_planted3" in out["figures"]
    plt.close("all")


def test_fit_returns_the_component_table(tmp_path) -> None:
    torch.set_num_threads(1)
    out = fit(
        TaskContext.local(tmp_path),
        data={"name": "friedman1", "n_samples": 120, "n_features": 6},
        model=TINY,
        importance="uniform",
    )
    rows = table_rows(out["tables"]["components"])
    assert rows and all(set(r) == {"component", "order", "norm", "inclusion", "true"} for r in rows)
    assert all(0 < r["inclusion"] <= 1 for r in rows)
    assert set(out["figures"]) == {"components", "trace"} and math.isfinite(out["metrics"]["rmse"])
    plt.close("all")
