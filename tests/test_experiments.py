"""Every experiment config composes and runs one batch of train/val/test (fast_dev_run)."""

from __future__ import annotations

import pytest

from litlab.train import train
from tests.conftest import experiment_names

# Experiments whose data preparation trains a model when the cache is cold (crosstok's teacher LM, about
# 40 s of CPU): their one-step run is an end-to-end run over 20 s, so it belongs to the slow suite.
TRAIN_IN_DATA_PREPARATION = {"crosstok/distill"}


def test_experiment_list_is_not_empty() -> None:
    assert "kan/function_fit" in experiment_names()


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(name, marks=pytest.mark.slow) if name in TRAIN_IN_DATA_PREPARATION else name
        for name in experiment_names()
    ],
)
def test_experiment_runs_one_step(name: str, compose_config) -> None:
    overrides = [f"experiment={name}", "debug=fdr", "trainer.detect_anomaly=false"]
    cfg = compose_config("train", overrides)
    train(cfg)
