"""Fast feedback: help, a config error and `import litlab` stay under their targets, before torch loads."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys

import pytest

from litlab.core.timing import child_cpu_seconds
from tests.conftest import BIN

# Targets on a 2-core machine (issue: --help and a config error <= 1.5 s, import litlab <= 0.3 s). The
# bounds are the targets, measured as the median CPU time of the child over 3 runs, which other jobs on a
# shared machine barely move (wall time would measure the load, not litlab).
TARGETS = {"import": 0.3, "help": 1.5, "config_error": 1.5}
ENV = {**os.environ, "PYTHONWARNINGS": "ignore"}


def _median_cpu(command: list[str], code: int) -> float:
    runs = [child_cpu_seconds(command, ENV) for _ in range(3)]
    assert all(run[2] == code for run in runs), f"{command} exited with {[run[2] for run in runs]}"
    return statistics.median(run[0] for run in runs)


def test_import_litlab_is_light() -> None:
    assert _median_cpu([sys.executable, "-c", "import litlab"], 0) <= TARGETS["import"]


@pytest.mark.parametrize("app", ["litlab-train", "litlab-run", "litlab-eval"])
def test_help_is_fast(app: str) -> None:
    assert _median_cpu([str(BIN / app), "--help"], 0) <= TARGETS["help"]


def test_a_config_error_is_reported_fast() -> None:
    assert _median_cpu([str(BIN / "litlab-train"), "trainer.max_epochs=abc"], 2) <= TARGETS["config_error"]


def test_checks_run_before_torch_is_imported() -> None:
    probe = (
        "import sys\n"
        "sys.argv = ['litlab-train', 'model.net.widht=3']\n"
        "from litlab.train import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "print(sorted(m for m in ('torch', 'lightning') if m in sys.modules))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, env=ENV, timeout=120
    )
    assert result.stdout.strip() == "[]", result.stdout + result.stderr[-1000:]
