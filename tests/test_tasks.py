"""Every task config composes; the KAN tasks run at a tiny size and write their tables and plots."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hydra.utils import get_method, instantiate

from litlab.core.results import write_results
from litlab.methods.kan.report import kan_init_report
from litlab.task import TaskContext
from tests.conftest import task_names


@pytest.mark.parametrize("name", task_names())
def test_task_config_composes_to_a_callable(name: str, compose_config) -> None:
    cfg = compose_config("run", [f"task={name}"])
    assert cfg.task.get("_partial_") is True, "a task is called with output_dir, so it must be _partial_"
    assert callable(get_method(cfg.task._target_))


def test_kan_ntk_task_writes_table_and_plot(compose_config, tmp_path: Path) -> None:
    cfg = compose_config(
        "run",
        [
            "task=kan/ntk",
            "task.width=4",
            "task.depth=1",
            "task.n_train=64",
            "task.n_ntk_points=16",
            "task.epochs=4",
            "task.eval_epochs=[0,4]",
        ],
    )
    results = instantiate(cfg.task)(TaskContext.local(tmp_path))["metrics"]
    assert set(results) >= {"glorot/effective_rank", "baseline/condition_number"}
    assert (tmp_path / "ntk.csv").read_text().count("\n") == 1 + 3 * 2
    assert (tmp_path / "plots" / "ntk.png").exists()


def _fake_run(folder: Path, init: dict, width: int, seed: int, rel_l2: float) -> None:
    folder.mkdir(parents=True)
    net = {"width": width, "depth": 1, "grid_size": 5, "init": init}
    (folder / "config_resolved.yaml").write_text(
        json.dumps({"model": {"net": net}, "data": {"function": "f2"}, "seed": seed})
    )
    write_results(folder, kind="train", name="kan/function_fit", metrics={"test/rel_l2": rel_l2})


def test_init_report_counts_wins_on_median_over_seeds(tmp_path: Path) -> None:
    sweep = tmp_path / "sweep"
    base, glorot = (
        {"name": "baseline", "alpha": None, "beta": None},
        {"name": "glorot", "alpha": None, "beta": None},
    )
    # small model: glorot loses on the median (0.5 > 0.4) despite one lucky seed; wide model: glorot wins
    for i, (init, width, seed, err) in enumerate(
        [
            (base, 4, 0, 0.4),
            (base, 4, 1, 0.4),
            (glorot, 4, 0, 0.1),
            (glorot, 4, 1, 0.5),
            (glorot, 4, 2, 0.6),
            (base, 32, 0, 0.5),
            (glorot, 32, 0, 0.05),
        ]
    ):
        _fake_run(sweep / str(i), init, width, seed, err)
    results = kan_init_report(TaskContext.local(tmp_path), str(sweep))["metrics"]
    assert results == {"glorot/win_rate": 0.5}
    table = (tmp_path / "win_rates.csv").read_text()
    assert "win_rate_small" in table and "win_rate_wide" in table
    assert (tmp_path / "plots" / "win_scatter.png").exists()
