"""The run record: each resumed leg adds its command and code, and a changed config is kept and named."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from litlab.runner.run_record import config_changes, write_run_record


def _leg(folder: Path, config: dict) -> None:
    write_run_record(OmegaConf.create(config), folder)


def test_each_leg_appends_its_command_and_code_and_keeps_a_changed_config(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    config = {"task": {"early_stopping": {"every": 200}, "splits": ["r2r"]}, "seed": 0}
    _leg(tmp_path, config)
    first = (tmp_path / "config_resolved.yaml").read_text()
    assert (tmp_path / "git.txt").read_text().startswith(("commit: ", "not a git checkout"))

    with caplog.at_level(logging.WARNING):
        _leg(tmp_path, {**config, "resume": "auto"})  # leg 2: the same run, resumed
    assert not caplog.records, "resume= says how a leg starts, not what it runs: no warning"

    changed = {
        "task": {"early_stopping": {"every": 200, "min_steps": 2000}, "splits": ["r2e"]},
        "seed": 0,
        "resume": "auto",
    }
    with caplog.at_level(logging.WARNING):
        _leg(tmp_path, changed)  # leg 3: two keys differ
    assert (tmp_path / "config_resolved.yaml").read_text() == first, "the first leg's config is kept"
    assert OmegaConf.load(tmp_path / "config_resolved.leg3.yaml").task.early_stopping.min_steps == 2000
    [warning] = caplog.records
    assert "resume:" not in warning.getMessage()
    assert "leg 3" in warning.getMessage()
    assert "task.early_stopping.min_steps: (absent) -> 2000" in warning.getMessage()
    assert "task.splits[0]: r2r -> r2e" in warning.getMessage()
    assert len((tmp_path / "command.txt").read_text().splitlines()) == 3
    legs = [line for line in (tmp_path / "git.txt").read_text().splitlines() if line.startswith("leg ")]
    assert [line.split(":")[0] for line in legs] == ["leg 2", "leg 3"]


def test_config_changes_name_every_differing_leaf() -> None:
    before = "a:\n  b: 1\n  c: [1, 2]\nd: x\n"
    after = "a:\n  b: 1\n  c: [1, 3, 4]\ne: y\n"
    assert config_changes(before, after) == [
        "a.c[1]: 2 -> 3",
        "a.c[2]: (absent) -> 4",
        "d: x -> (absent)",
        "e: (absent) -> y",
    ]
    assert config_changes(before, before) == []
