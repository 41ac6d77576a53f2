"""CPU time: of a command in a child process (a start-up measure that other jobs on the machine hardly move),
and the median over repeats of a call in this process (the benchmarks' measure)."""

from __future__ import annotations

import resource
import statistics
import subprocess
import time
from collections.abc import Callable, Sequence
from typing import TypeVar

T = TypeVar("T")


def child_cpu_seconds(command: Sequence[str], env: dict[str, str] | None = None) -> tuple[float, float, int]:
    """(user + system CPU seconds, wall seconds, exit code) of one run of ``command``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    result = subprocess.run(list(command), capture_output=True, env=env, timeout=600)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, wall, result.returncode


def median_cpu_seconds(fn: Callable[[], T], repeats: int) -> tuple[float, T]:
    """(median process CPU seconds of ``repeats`` calls of ``fn``, the last call's result)."""
    times = []
    for _ in range(repeats):
        start = time.process_time()
        out = fn()
        times.append(time.process_time() - start)
    return statistics.median(times), out
