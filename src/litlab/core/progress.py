"""Progress over long loops (seeds × arms × cases): a rich bar on a terminal, a log line per 10 % else."""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterable, Iterator, Sized
from typing import TypeVar

T = TypeVar("T")
log = logging.getLogger("litlab")


def track(items: Iterable[T], description: str, total: int | None = None, done: int = 0) -> Iterator[T]:
    """Yield ``items`` while showing progress (a bar on a terminal; logged steps in batch jobs), counted
    from ``done`` items finished before these (a continued fit shows ``8/18``, not ``0/10``)."""
    total = total if total is not None else (len(items) if isinstance(items, Sized) else None)
    total = total + done if total is not None else None
    if sys.stderr.isatty():
        from rich.progress import track as rich_track

        yield from rich_track(items, description=description, total=total, completed=done, transient=True)
        return
    every = max(1, ((total or 10) - done) // 10)
    for index, item in enumerate(items):
        if index % every == 0:
            log.info("%s: %d/%s", description, done + index, total if total is not None else "?")
        yield item
    log.info("%s: done", description)
