"""The shared optimizer types and Lightning's optimizer return, without importing torch."""

from __future__ import annotations

import subprocess
import sys

import torch

from litlab.optim import step_scheduled


def test_step_scheduled_returns_the_optimizer_alone_or_with_a_per_step_scheduler() -> None:
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.1)
    assert step_scheduled(optimizer, None) is optimizer
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)
    assert step_scheduled(optimizer, scheduler) == {
        "optimizer": optimizer,
        "lr_scheduler": {"scheduler": scheduler, "interval": "step"},
    }


def test_importing_it_does_not_import_torch() -> None:
    probe = "import sys, litlab.optim; print('torch' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert result.stdout.strip() == "False", result.stderr[-500:]
