"""CPU time of a command in a child process: a start-up measure that other jobs on the machine hardly move."""

from __future__ import annotations

import resource
import subprocess
import time
from collections.abc import Sequence


def child_cpu_seconds(command: Sequence[str], env: dict[str, str] | None = None) -> tuple[float, float, int]:
    """(user + system CPU seconds, wall seconds, exit code) of one run of ``command``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    result = subprocess.run(list(command), capture_output=True, env=env, timeout=600)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, wall, result.returncode
