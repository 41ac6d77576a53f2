"""What a benchmark ran on, so its JSON results can be compared across machines."""

from __future__ import annotations

import os
import platform
from pathlib import Path


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo, else what ``platform`` reports."""
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def machine_info() -> dict[str, str | int]:
    """CPU model, core count, Python and torch versions."""
    import torch

    return {
        "cpu_model": cpu_model(),
        "cpu_count": os.cpu_count() or 1,
        "python_version": platform.python_version(),
        "torch_version": torch.__version__,
    }
