"""``litlab-run ... logger=...``: a task's metrics, tables and plots reach wandb and tensorboard too."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import pytest
import wandb
from omegaconf import open_dict
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from litlab.core.results import TaskOutput
from litlab.run import run_task
from litlab.task import TaskContext


def small_study(ctx: TaskContext) -> TaskOutput:
    """A task with one metric, one table and one plot."""
    figure, axis = plt.subplots()
    axis.plot([0, 1], [1, 0])
    rows = [{"arm": "ours", "error": 0.25}, {"arm": "baseline", "error": 0.5}]
    return {"metrics": {"ours/error": 0.25}, "tables": {"arms": rows}, "figures": {"curve": figure}}


def test_a_task_logs_its_metrics_tables_and_plots_to_wandb_and_tensorboard(
    compose_config, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WANDB_MODE", "offline")
    summaries: list[dict] = []
    finish = wandb.finish

    def keep_summary_and_finish(*args, **kwargs) -> None:
        summary = wandb.run.summary  # keys() and [] only: it is not a mapping
        summaries.append({key: summary[key] for key in summary.keys()})  # noqa: SIM118
        finish(*args, **kwargs)

    monkeypatch.setattr(wandb, "finish", keep_summary_and_finish)
    cfg = compose_config("run", ["task=kan/ntk", "logger=many", "optimized_metric=ours/error"])
    with open_dict(cfg):
        cfg.task = {"_target_": f"{__name__}.small_study", "_partial_": True}
    assert run_task(cfg) == 0.25
    folder = Path(cfg.paths.output_dir)
    assert summaries and summaries[0]["ours/error"] == 0.25, "a wandb sweep reads its metric from the summary"
    media = next(folder.glob("wandb/offline-run-*/files/media"))
    assert [p.name.split("_")[0] for p in media.glob("images/plots/*.png")] == ["curve"]
    assert [p.name.split("_")[0] for p in media.glob("table/tables/*.table.json")] == ["arms"]
    events = EventAccumulator(str(folder / "tensorboard")).Reload()
    assert events.Tags()["images"] == ["plots/curve"]
    assert [e.value for e in events.Scalars("ours/error")] == [0.25]


def test_without_a_logger_a_task_writes_only_its_run_folder(compose_config) -> None:
    cfg = compose_config("run", ["task=kan/ntk"])
    with open_dict(cfg):
        cfg.task = {"_target_": f"{__name__}.small_study", "_partial_": True}
    run_task(cfg)
    folder = Path(cfg.paths.output_dir)
    assert (folder / "results.json").is_file() and (folder / "plots" / "curve.png").is_file()
    assert not any((folder / name).exists() for name in ("wandb", "tensorboard", "csv"))
