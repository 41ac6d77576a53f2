"""Resumable stages: each (stage, shard) appends its outputs to a JSONL file, one line per item key, a
batch at a time (fsync'd). A rerun reads the file, skips the keys it holds and asks only for the rest; a
line cut short by a crash is trimmed and asked again, so nothing is lost and nothing is asked twice."""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from litlab.core.errors import LitlabError

log = logging.getLogger("litlab")


class StageBackend(Protocol):
    name: str

    def run(self, stage: str, items: Sequence[dict[str, Any]]) -> list[dict[str, Any] | None]: ...


def read_outputs(path: Path) -> dict[str, Any]:
    """Stored outputs by key; trims a truncated last line (its item is asked again)."""
    if not path.exists():
        return {}
    text = path.read_text()
    if text and not text.endswith("\n"):
        log.warning("%s: dropping a truncated last line (its item is asked again)", path)
        text = text[: text.rfind("\n") + 1]
        path.write_text(text)
    outputs = {}
    for number, line in enumerate(text.splitlines(), 1):
        try:
            record = json.loads(line)
        except ValueError:
            raise LitlabError(f"{path}:{number} is not JSON; the stage file is damaged") from None
        outputs[record["key"]] = record["out"]
    return outputs


def run_stage(
    backend: StageBackend, stage: str, items: Sequence[dict[str, Any]], path: Path, batch_size: int = 32
) -> list[Any]:
    """Outputs of ``stage`` for every item, in order: stored ones read back, the rest asked in batches and
    appended as each batch returns."""
    keys = [item["key"] for item in items]
    if len(set(keys)) != len(keys):
        raise LitlabError(f"{stage}: item keys must be unique within a shard")
    done = read_outputs(path)
    todo = [item for item in items if item["key"] not in done]
    path.parent.mkdir(parents=True, exist_ok=True)
    for start in range(0, len(todo), batch_size):
        batch = todo[start : start + batch_size]
        outputs = backend.run(stage, batch)
        if len(outputs) != len(batch):
            raise LitlabError(
                f"backend {backend.name} returned {len(outputs)} outputs for {len(batch)} items"
            )
        lines = [{"key": item["key"], "out": out} for item, out in zip(batch, outputs, strict=True)]
        with path.open("a") as handle:
            handle.write("".join(json.dumps(line) + "\n" for line in lines))
            handle.flush()
            os.fsync(handle.fileno())
        done.update((line["key"], line["out"]) for line in lines)
    return [done[k] for k in keys]
