"""Every task config composes to a callable (each paper tests its own tasks under tests/methods)."""

from __future__ import annotations

import pytest
from hydra.utils import get_method

from tests.conftest import task_names


@pytest.mark.parametrize("name", task_names())
def test_task_config_composes_to_a_callable(name: str, compose_config) -> None:
    cfg = compose_config("run", [f"task={name}"])
    assert cfg.task.get("_partial_") is True, "a task is called with output_dir, so it must be _partial_"
    assert callable(get_method(cfg.task._target_))
