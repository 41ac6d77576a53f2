"""Process-level CPU settings of ``litlab.core.machine``."""

from __future__ import annotations

import platform
import subprocess
import sys

import pytest

FAULTS = """
import resource, sys
from litlab.core.machine import keep_freed_memory
if sys.argv[1] == "keep":
    assert keep_freed_memory(64)
def step():  # a step's work buffers: 0.5-4 MB each, 18 MB alive at once, every page written, then freed
    buffers = [bytearray(n << 19) for n in (1, 2, 3, 4, 5, 6, 7, 8)]
    for b in buffers:
        b[::4096] = b"\\x01" * len(range(0, len(b), 4096))
for _ in range(5):  # warm-up: glibc's own dynamic thresholds move after the first frees
    step()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(20):
    step()
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt is glibc's")
def test_kept_freed_memory_stops_page_faults_on_reused_work_buffers() -> None:
    """Twenty steps of a few MB-sized work buffers: glibc's default hands the memory back to the OS after each
    step and faults it in afresh; kept, the heap reuses it."""

    def faults(mode: str) -> int:
        out = subprocess.run([sys.executable, "-c", FAULTS, mode], capture_output=True, text=True, check=True)
        return int(out.stdout.split()[-1])

    kept, default = faults("keep"), faults("default")
    assert kept < 100 < 5000 < default, (kept, default)
