"""The run folder is the run's, and only its: valid ids, no overwrite, one writer at a time.

A folder that already holds a run (its resolved config, results or checkpoints) is only entered again to
continue that run (``resume=``, or a SLURM requeue). While a run is alive it holds an exclusive
``flock`` on ``<folder>/.litlab.lock``; the kernel releases it when the process dies, so a lock left
by a killed run is never mistaken for a live one.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import socket
import time
from pathlib import Path
from typing import IO

from litlab.core.errors import ConfigError

RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._=+-]{0,199}")
RUN_MARKERS = ("config_resolved.yaml", "results.json", "checkpoints")
LOCK_NAME = ".litlab.lock"


def check_run_id(run_id: object) -> str:
    """``run_id`` as a string if it is one safe folder name (no '/', no '..', not empty), else an error."""
    text = "" if run_id is None else str(run_id)
    if not RUN_ID.fullmatch(text) or ".." in text:
        raise ConfigError(
            f"run_id={text!r} is not a valid run id: use one folder name of letters, digits and . _ = + - "
            "(no '/', no '..', not empty), e.g. run_id=baseline_seed0"
        )
    return text


def holds_run(folder: Path) -> bool:
    """Whether ``folder`` already holds (part of) a run."""
    return any((folder / marker).exists() for marker in RUN_MARKERS)


def describe_run(folder: Path) -> str:
    """A few words on what an existing run folder holds (for error messages)."""
    parts = []
    results = folder / "results.json"
    if results.exists():
        parts.append("a finished run (results.json)")
    last = folder / "checkpoints" / "last.ckpt"
    if last.exists():
        parts.append("checkpoints/last.ckpt")
    return ", ".join(parts) or "a run record"


def check_not_taken(folder: Path, resume: object, restarted: bool = False) -> None:
    """Refuse to start a new run in a folder that already holds one (``resume`` continues it instead)."""
    if resume not in (None, False, "none") or restarted or not holds_run(folder):
        return
    raise ConfigError(
        f"{folder} already holds {describe_run(folder)}; nothing was changed. Continue it with the same "
        "command plus resume=auto, or start a new run with another run_id=<name>"
    )


def check_writable(folder: Path) -> None:
    """Fail early, with the folder's name, when runs cannot be written under ``folder``."""
    probe = folder
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    if not os.access(probe, os.W_OK | os.X_OK):
        raise ConfigError(
            f"cannot write to {probe} (no permission); set paths.log_dir=<writable folder> or run elsewhere"
        )


class RunLock:
    """An exclusive lock on a run folder for the life of the run (released on exit or death)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.path = folder / LOCK_NAME
        self._handle: IO[str] | None = None

    def acquire(self) -> RunLock:
        self.folder.mkdir(parents=True, exist_ok=True)
        handle = open(self.path, "a+")  # noqa: SIM115  (held open for the run's life)
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            owner = handle.read().strip() or "another process"
            handle.close()
            raise ConfigError(
                f"{self.folder} is in use by a running run ({owner}); wait for it to finish or choose "
                "another run_id=<name>"
            ) from None
        handle.seek(0)
        handle.truncate()
        handle.write(
            json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "since": time.strftime("%FT%T")})
        )
        handle.flush()
        self._handle = handle
        return self

    def release(self) -> None:
        if self._handle is not None:
            fcntl.flock(self._handle, fcntl.LOCK_UN)
            self._handle.close()
            self._handle = None


def clean_stale_temporaries(folder: Path) -> list[Path]:
    """Remove ``.*.tmp`` files left by a killed writer (call only while holding the run's lock)."""
    stale = [p for p in folder.rglob(".*.tmp") if p.is_file()]
    for path in stale:
        path.unlink(missing_ok=True)
    return stale
