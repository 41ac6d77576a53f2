"""Every experiment config composes and runs one batch of train/val/test (fast_dev_run)."""

from __future__ import annotations

import pytest

from litlab.train import train
from tests.conftest import experiment_names


def test_experiment_list_is_not_empty() -> None:
    assert "kan/function_fit" in experiment_names()


@pytest.mark.parametrize("name", experiment_names())
def test_experiment_runs_one_step(name: str, compose_config) -> None:
    overrides = [f"experiment={name}", "debug=fdr", "trainer.detect_anomaly=false"]
    cfg = compose_config("train", overrides)
    train(cfg)
