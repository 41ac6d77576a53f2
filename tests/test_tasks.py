"""Every task config composes to a callable (each paper tests its own tasks under tests/methods)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from hydra.utils import get_method

from litlab.core.results import TaskOutput
from litlab.run import run_task
from litlab.task import TaskContext
from tests.conftest import task_names, task_run_config


@pytest.mark.parametrize("name", task_names())
def test_task_config_composes_to_a_callable(name: str, compose_config) -> None:
    cfg = compose_config("run", [f"task={name}"])
    assert cfg.task.get("_partial_") is True, "a task is called with output_dir, so it must be _partial_"
    assert callable(get_method(cfg.task._target_))


def report_threads(ctx: TaskContext) -> TaskOutput:
    """A task that pins its machine-independent default of one thread and reports what it got."""
    return {"metrics": {"threads": ctx.pin_threads(1)}}


@pytest.mark.parametrize(("overrides", "expected"), [([], 1), (["extras.torch_threads=3"], 3)])
def test_a_task_thread_default_yields_to_extras_torch_threads(
    overrides: list[str], expected: int, compose_config
) -> None:
    cfg = task_run_config(compose_config, f"{__name__}.report_threads", *overrides)
    before = torch.get_num_threads()
    try:
        run_task(cfg)
        assert torch.get_num_threads() == expected
    finally:
        torch.set_num_threads(before)
    results = json.loads(next(Path(cfg.paths.output_dir).rglob("results.json")).read_text())
    assert results["metrics"]["threads"] == expected
