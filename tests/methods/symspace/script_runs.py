"""Running the symspace shell scripts in tests: tiny overrides, a stand-in python that records, a runner."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).parents[3]
TINY = (
    "task.seeds=[0] task.classifier_epochs=1 task.max_steps=2 task.early_stopping.every=1 "
    "task.data.grid.image_size=16 task.models.cartanfm.unet_width=8 task.models.fm_only.unet_width=8 "
    "task.models.cartanfm.sample_steps=2 task.models.fm_only.sample_steps=2 extras.torch_threads=1"
)


def fake_python(tmp_path: Path) -> tuple[Path, Path]:
    """A stand-in for python that records each command line in calls.txt and succeeds: the scripts' own
    logic (defaults, order, overrides) checked in milliseconds."""
    calls = tmp_path / "calls.txt"
    stub = tmp_path / "python"
    stub.write_text(f'#!/usr/bin/env bash\necho "$*" >> {calls}\n')
    stub.chmod(0o755)
    return stub, calls


def run_script(name: str, *args: str, unset: tuple[str, ...] = (), timeout: int = 300, **env: str):
    """``bash scripts/<name> args`` from the checkout, with ``env`` added and ``unset`` removed."""
    environment = {k: v for k, v in os.environ.items() if k not in unset} | env
    command = ["bash", str(ROOT / "scripts" / name), *args]
    return subprocess.run(command, env=environment, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
