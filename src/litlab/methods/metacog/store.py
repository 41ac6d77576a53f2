"""Resumable runs: every answer is appended to a JSONL file as soon as it comes back, one line per query
key; a rerun reads the file, skips the keys it holds and asks only for the rest. A line cut short by a
crash is dropped and its query asked again, so nothing is lost and nothing is counted twice."""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from litlab.core.errors import LitlabError
from litlab.methods.metacog.backends import Backend, Query, Reply
from litlab.methods.metacog.parsing import parse_label

log = logging.getLogger("litlab")


def read_records(path: str | os.PathLike) -> dict[str, dict[str, Any]]:
    """A run file's records by key (a truncated last line is ignored; a damaged earlier one is an error)."""
    path = Path(path)
    if not path.exists():
        return {}
    lines = path.read_text().splitlines()
    records: dict[str, dict[str, Any]] = {}
    for number, line in enumerate(lines, 1):
        try:
            record = json.loads(line)
        except ValueError:
            if number == len(lines):
                log.warning("%s: ignoring a truncated last line (its query is asked again)", path)
                break
            raise LitlabError(f"{path}:{number} is not JSON; the answers file is damaged") from None
        records[record["key"]] = record
    return records


def record(query: Query, reply: Reply, backend: str) -> dict[str, Any]:
    """The stored line: the query's key, kind and variables, the raw reply, its parsed label (None if
    unparseable) and the label log-probs when the backend gave them."""
    return {
        "key": query.key,
        "kind": query.kind,
        "item": query.item["id"],
        "meta": query.meta,
        "backend": backend,
        "text": reply.text,
        "label": parse_label(reply.text, query.labels),
        "logprobs": reply.logprobs,
    }


def run_queries(
    backend: Backend, queries: Sequence[Query], path: str | os.PathLike, batch_size: int = 64
) -> list[dict[str, Any]]:
    """Ask ``backend`` every query not yet answered in ``path`` (in batches, appending each batch as it
    comes back) and return all records in the order of ``queries``."""
    path = Path(path)
    keys = [q.key for q in queries]
    if len(set(keys)) != len(keys):
        raise LitlabError("query keys must be unique within a run")
    done = read_records(path)
    if path.exists() and path.stat().st_size and path.read_bytes()[-1:] != b"\n":  # cut a truncated tail
        text = path.read_text()
        path.write_text(text[: text.rfind("\n") + 1])
    todo = [q for q in queries if q.key not in done]
    path.parent.mkdir(parents=True, exist_ok=True)
    for start in range(0, len(todo), batch_size):
        batch = todo[start : start + batch_size]
        replies = backend.complete(batch)
        if len(replies) != len(batch):
            raise LitlabError(
                f"backend {backend.name} returned {len(replies)} replies for {len(batch)} queries"
            )
        lines = [record(q, r, backend.name) for q, r in zip(batch, replies, strict=True)]
        with path.open("a") as handle:
            handle.write("".join(json.dumps(line) + "\n" for line in lines))
            handle.flush()
            os.fsync(handle.fileno())
        done.update((line["key"], line) for line in lines)
    return [done[k] for k in keys]
