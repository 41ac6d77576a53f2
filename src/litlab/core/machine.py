"""What a benchmark ran on, so its JSON results can be compared across machines; process-level settings
that make CPU work faster on it."""

from __future__ import annotations

import ctypes
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


def skip_gpu_probe_on_cpu_machines() -> None:
    """Stop torch from probing NVML at every optimizer step when the machine has no GPU.

    Lightning sets ``PYTORCH_NVML_BASED_CUDA_CHECK=1`` (so that checking for CUDA cannot break a later
    fork); torch's optimizers then ask NVML for the device count at every ``step`` (a ``dlopen``, about
    0.2 ms). Where NVML sees no GPU there is nothing to protect, so the variable is removed.
    """
    if os.environ.get("PYTORCH_NVML_BASED_CUDA_CHECK") != "1":
        return
    import torch

    if torch.cuda.device_count() == 0:
        del os.environ["PYTORCH_NVML_BASED_CUDA_CHECK"]


def keep_freed_memory(megabytes: int) -> bool:
    """glibc only: keep freed buffers of up to ``megabytes`` in the heap (``M_MMAP_THRESHOLD``, and twice
    that as ``M_TRIM_THRESHOLD``) instead of handing each back to the OS. Otherwise a CPU step's work tensors
    of a few MB are page-faulted afresh every time (a 48×64 Gaussian-splatting view: 30 ms, 18 of them
    system time; 19 ms with this). Returns whether both were set (False off glibc)."""
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return False
    size = megabytes << 20
    return bool(libc.mallopt(-3, size)) and bool(libc.mallopt(-1, 2 * size))
