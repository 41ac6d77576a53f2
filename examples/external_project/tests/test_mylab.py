"""mylab's own tests: its configs compose through litlab, its sweep spec cannot drift, a short run learns."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from litlab.runner.sweeps import check_sweep_spec, compose_train

CONFIGS = Path(__file__).resolve().parents[1] / "src" / "mylab" / "configs"


def test_both_experiments_compose_with_my_model_and_data() -> None:
    for name, hidden in (("mine", 32), ("mine_wide", 128)):
        cfg = compose_train([f"experiment={name}"])
        assert cfg.model._target_ == "mylab.model.TinyRegressor" and cfg.model.hidden == hidden
        assert cfg.data._target_ == "mylab.data.NoisySine"


def test_sweep_spec_composes_with_every_value() -> None:
    # the base, then two points: each parameter's list has two values, and point i sets every one to its i-th
    assert check_sweep_spec(CONFIGS / "sweep" / "mylab" / "width.yaml") == 1 + 2


def test_a_short_run_learns_the_sine(tmp_path: Path) -> None:
    # `python -m litlab.train` is litlab-train, found whether or not the environment's bin/ is on PATH
    command = [sys.executable, "-m", "litlab.train", "experiment=mine", "trainer.max_epochs=25"]
    command.append("run_id=short")
    result = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    results = json.loads((tmp_path / "outputs" / "mine" / "short" / "results.json").read_text())
    assert results["value"] < 0.25, "test MSE well below the target's variance (0.5)"
