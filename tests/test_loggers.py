"""``logger=many``: a training run's and a task's metrics and plots (and a task's tables) reach wandb and
tensorboard as well as the run folder; wandb's summary holds the metric a sweep reads."""

from __future__ import annotations

import re
from pathlib import Path

import matplotlib.pyplot as plt
import pytest
import wandb
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from litlab.core.results import TaskOutput
from litlab.run import run_task
from litlab.task import TaskContext
from litlab.train import train
from tests.conftest import task_run_config


def small_study(ctx: TaskContext) -> TaskOutput:
    """A task with one metric, one table and one plot."""
    figure, axis = plt.subplots()
    axis.plot([0, 1], [1, 0])
    rows = [{"arm": "ours", "error": 0.25}, {"arm": "baseline", "error": 0.5}]
    return {"metrics": {"ours/error": 0.25}, "tables": {"arms": rows}, "figures": {"curve": figure}}


def media_names(folder: Path, pattern: str) -> list[str]:
    """Names of the wandb media files matching ``pattern``, without wandb's ``_<step>_<hash>`` suffix."""
    return sorted(re.sub(r"_\d+_[0-9a-f]+$", "", p.name.split(".")[0]) for p in folder.glob(pattern))


@pytest.fixture
def wandb_summaries(monkeypatch: pytest.MonkeyPatch) -> list[dict]:
    """wandb offline; the summary of every run that finishes, read just before it does."""
    monkeypatch.setenv("WANDB_MODE", "offline")
    summaries: list[dict] = []
    finish = wandb.finish

    def keep_summary_and_finish(*args, **kwargs) -> None:
        summary = wandb.run.summary  # keys() and [] only: it is not a mapping
        summaries.append({key: summary[key] for key in summary.keys()})  # noqa: SIM118
        finish(*args, **kwargs)

    monkeypatch.setattr(wandb, "finish", keep_summary_and_finish)
    return summaries


def test_a_training_run_logs_its_metrics_and_plots_to_wandb_and_tensorboard(
    compose_config, wandb_summaries: list[dict]
) -> None:
    overrides = ["experiment=kan/function_fit", "logger=many", "trainer.max_epochs=1"]
    overrides += ["trainer.limit_train_batches=2", "trainer.limit_val_batches=1", "extras.print_config=false"]
    cfg = compose_config("train", overrides)
    value = train(cfg)
    folder = Path(cfg.paths.output_dir)
    assert wandb_summaries and wandb_summaries[0]["test/rel_l2"] == pytest.approx(value)
    media = next(folder.glob("wandb/offline-run-*/files/media"))
    assert media_names(media, "images/plots/*.png") == ["test_prediction"]
    events = EventAccumulator(str(folder / "tensorboard")).Reload()
    assert events.Tags()["images"] == ["plots/test_prediction"]
    assert (folder / "plots" / "test_prediction.png").is_file()


def test_a_task_logs_its_metrics_tables_and_plots_to_wandb_and_tensorboard(
    compose_config, wandb_summaries: list[dict]
) -> None:
    overrides = ["logger=many", "optimized_metric=ours/error"]
    cfg = task_run_config(compose_config, f"{__name__}.small_study", *overrides)
    assert run_task(cfg) == 0.25
    folder = Path(cfg.paths.output_dir)
    assert wandb_summaries and wandb_summaries[0]["ours/error"] == 0.25, "a sweep reads its metric there"
    media = next(folder.glob("wandb/offline-run-*/files/media"))
    assert media_names(media, "images/plots/*.png") == ["curve"]
    assert media_names(media, "table/tables/*.table.json") == ["arms"]
    events = EventAccumulator(str(folder / "tensorboard")).Reload()
    assert events.Tags()["images"] == ["plots/curve"]
    assert [e.value for e in events.Scalars("ours/error")] == [0.25]


def test_without_a_logger_a_task_writes_only_its_run_folder(compose_config) -> None:
    cfg = task_run_config(compose_config, f"{__name__}.small_study")
    run_task(cfg)
    folder = Path(cfg.paths.output_dir)
    assert (folder / "results.json").is_file() and (folder / "plots" / "curve.png").is_file()
    assert not any((folder / name).exists() for name in ("wandb", "tensorboard", "csv"))
