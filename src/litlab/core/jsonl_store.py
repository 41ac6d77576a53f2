"""Resumable per-item outputs of a long pipeline stage (the LLM-pipeline papers: Webscale-RL, MGA): one
JSONL line per item key, appended a batch at a time (fsync'd). A rerun skips the keys a file holds; a last
line cut short by a crash is trimmed and its item asked again."""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from litlab.core.errors import LitlabError
from litlab.core.progress import track

log = logging.getLogger("litlab")


def read_outputs(path: Path) -> dict[str, Any]:
    """Stored outputs by key; a truncated last line is trimmed (its item is asked again)."""
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
    ask: Callable[[Sequence[dict[str, Any]]], list[Any]],
    items: Sequence[dict[str, Any]],
    path: Path,
    batch_size: int,
    description: str,
) -> list[Any]:
    """Outputs of ``ask`` for every item, in order: stored ones read back, the rest asked in batches and
    appended as each batch returns."""
    keys = [item["key"] for item in items]
    if len(set(keys)) != len(keys):
        raise LitlabError(f"{description}: item keys must be unique (duplicate document ids?)")
    done = read_outputs(path)
    todo = [item for item in items if item["key"] not in done]
    path.parent.mkdir(parents=True, exist_ok=True)
    batches = [todo[i : i + batch_size] for i in range(0, len(todo), batch_size)]
    for batch in track(batches, description):
        outputs = ask(batch)
        if len(outputs) != len(batch):
            raise LitlabError(f"{description}: {len(outputs)} outputs for {len(batch)} items")
        lines = [{"key": item["key"], "out": out} for item, out in zip(batch, outputs, strict=True)]
        with path.open("a") as handle:
            handle.write("".join(json.dumps(line) + "\n" for line in lines))
            handle.flush()
            os.fsync(handle.fileno())
        done.update((line["key"], line["out"]) for line in lines)
    return [done[k] for k in keys]
