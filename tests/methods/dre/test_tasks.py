"""The study and shift tasks at a tiny size: they compose from their configs, run through a TaskContext and
return the tables, metrics and figure the README quotes."""

from __future__ import annotations

from pathlib import Path

from hydra.utils import instantiate

from litlab.core.results import write_results
from litlab.task import TaskContext

TINY_STUDY = [
    "task=dre/study",
    "task.seeds=[0]",
    "task.ns=[120,240]",
    "task.families=[{dim:2,n_components:2,separation:1.0}]",
    "~task.grids.full",
    "task.grids.lambda_path.n_centres=20",
    "task.loss_families=[{dim:3,n_components:2,separation:1.0}]",
    "task.loss_n=120",
    "task.loss_seeds=[0]",
    "task.losses=[kulsif,lr]",
    "task.loss_centres=20",
    "task.estimators=[kliep]",
    "task.neural.n=120",
    "task.neural.seeds=[0]",
    "task.neural.widths=[8]",
    "task.neural.weight_decays=[0.0]",
    "task.neural.epochs=[1,2]",
]


def test_study_task_writes_the_paper_table_curves_and_neural_rows(compose_config, tmp_path: Path) -> None:
    cfg = compose_config("run", TINY_STUDY)
    output = instantiate(cfg.task)(TaskContext.local(tmp_path))
    tables = output["tables"]
    assert [row["loss"] for row in tables["paper_vs_ours"]] == ["kulsif", "lr"]
    assert tables["paper_vs_ours"][0]["paper_aggregation"] == 10.683
    assert set(tables["error_vs_n"].n) == {120, 240}
    assert set(tables["neural"].method) >= {"aggregation", "validation", "oracle"}
    assert set(tables["estimators"].method_grid) == {"kliep"}
    assert "lambda_path/settings_agg_le_cv" in output["metrics"] and "neural/aggregation" in output["metrics"]
    write_results(tmp_path, kind="task", name="dre/study", **output)
    assert (tmp_path / "plots" / "error_vs_n.png").exists() and (tmp_path / "runs.csv").exists()


def test_shift_task_compares_weightings(compose_config, tmp_path: Path) -> None:
    cfg = compose_config(
        "run", ["task=dre/shift", "task.seeds=[0]", "task.datasets=[diabetes]", "task.n_centres=20"]
    )
    output = instantiate(cfg.task)(TaskContext.local(tmp_path))
    summary = output["tables"]["shift_summary"]
    assert set(summary.weights) == {
        "aggregation",
        "aggregation_split",
        "cv",
        "bma",
        "super_learner",
        "uniform",
        "unweighted",
        "true",
    }
    assert output["metrics"]["diabetes/true/ratio_error"] == 0.0
    assert set(output["figures"]) == {"shift"}
