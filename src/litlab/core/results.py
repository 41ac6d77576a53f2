"""The one results schema: what every run (training, evaluation, task) leaves in its folder.

``results.json``::

    {"schema": "litlab.results/1", "kind": "train" | "eval" | "task", "name": "<experiment or task>",
     "metrics": {"<key>": <float>, ...}, "optimized_metric": "<key>" | null, "value": <float> | null,
     "tables": {"<table>": "tables/<table>.csv", ...}, "plots": ["plots/<name>.png", ...]}

Tables are written as CSV (what scripts read) and Markdown (what READMEs quote). A task returns a
:data:`TaskOutput` dict (``metrics``, ``tables``, ``figures``); the entry point writes it with
:func:`write_results`. ``publish`` copies a study's results into ``results/<paper>/<study>/``.
"""

from __future__ import annotations

import csv
import io
import json
import math
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TypedDict

from litlab.core.cache import write_text_atomic
from litlab.core.errors import LitlabError

SCHEMA = "litlab.results/1"
KINDS = ("train", "eval", "task")
TASK_KEYS = ("metrics", "tables", "figures")
Row = Mapping[str, Any]


class TaskOutput(TypedDict, total=False):
    """What a task returns: scalar metrics, tables (rows of dicts, or DataFrames) and figures."""

    metrics: dict[str, float]
    tables: dict[str, Any]
    figures: dict[str, Any]


def as_float(value: Any) -> float:
    """A Python float from a number, a numpy scalar or a one-element tensor."""
    if hasattr(value, "item"):
        value = value.item()
    return float(value)


def _single_number(value: Any) -> bool:
    """A one-element tensor or numpy array/scalar."""
    if not hasattr(value, "item"):
        return False
    size = value.numel() if hasattr(value, "numel") else getattr(value, "size", 2)
    return size == 1


def scalar_metrics(metrics: Mapping[str, Any]) -> dict[str, float]:
    """The entries of ``metrics`` that are single numbers, as floats (others are left out)."""
    scalars = {}
    for key, value in metrics.items():
        if isinstance(value, bool | int | float) or _single_number(value):
            scalars[str(key)] = as_float(value)
    return scalars


def check_task_output(output: Any, task: str) -> TaskOutput:
    """``output`` as a TaskOutput, or a clear error naming what the task returned instead."""
    if output is None:
        return {}
    if not isinstance(output, Mapping) or not set(output) <= set(TASK_KEYS):
        got = sorted(output) if isinstance(output, Mapping) else type(output).__name__
        raise LitlabError(
            f"task {task} returned {got}; a task returns a dict with keys among {list(TASK_KEYS)} "
            "(metrics: {name: number}, tables: {name: rows}, figures: {name: Figure})"
        )
    return dict(output)  # type: ignore[return-value]


def table_rows(table: Any) -> list[dict[str, Any]]:
    """Rows (dicts) of a table given as a list of mappings or a pandas DataFrame."""
    if hasattr(table, "to_dict"):
        return [dict(row) for row in table.to_dict(orient="records")]
    if isinstance(table, Sequence) and all(isinstance(row, Mapping) for row in table):
        return [dict(row) for row in table]
    raise LitlabError(f"a table must be a list of dicts or a DataFrame, got {type(table).__name__}")


def _columns(rows: Sequence[Row]) -> list[str]:
    columns: list[str] = []
    for row in rows:
        columns += [key for key in row if key not in columns]
    return columns


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return "nan" if math.isnan(value) else f"{value:.4g}"
    return str(value)


def to_csv(rows: Sequence[Row]) -> str:
    """CSV text of ``rows`` (columns in order of first appearance)."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=_columns(rows), lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return buffer.getvalue()


def to_markdown(rows: Sequence[Row]) -> str:
    """A Markdown table of ``rows`` with 4 significant digits for floats."""
    columns = _columns(rows)
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(_cell(row.get(c, "")) for c in columns) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def write_results(
    folder: str | Path,
    *,
    kind: str,
    name: str,
    metrics: Mapping[str, Any] | None = None,
    optimized_metric: str | None = None,
    value: float | None = None,
    tables: Mapping[str, Any] | None = None,
    figures: Mapping[str, Any] | None = None,
) -> Path:
    """Write tables, figures and ``results.json`` into ``folder``; returns the path of results.json."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    from litlab.core.figures import save_figure

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    table_files = {}
    for table_name, table in (tables or {}).items():
        rows = table_rows(table)
        (folder / "tables").mkdir(exist_ok=True)
        (folder / "tables" / f"{table_name}.csv").write_text(to_csv(rows))
        (folder / "tables" / f"{table_name}.md").write_text(to_markdown(rows))
        table_files[table_name] = f"tables/{table_name}.csv"
    for figure_name, figure in (figures or {}).items():
        save_figure(figure, folder, figure_name)
    plots = sorted(str(p.relative_to(folder)) for p in (folder / "plots").glob("*.png"))
    payload = {
        "schema": SCHEMA,
        "kind": kind,
        "name": name,
        "metrics": scalar_metrics(metrics or {}),
        "optimized_metric": optimized_metric,
        "value": value,
        "tables": table_files,
        "plots": plots,
    }
    path = folder / "results.json"
    write_text_atomic(path, json.dumps(payload, indent=2, sort_keys=True, allow_nan=True) + "\n")
    return path


def read_results(folder: str | Path) -> dict[str, Any]:
    """The parsed ``results.json`` of a run folder (an error if it is missing or of another schema)."""
    path = Path(folder) / "results.json"
    try:
        payload = json.loads(path.read_text())
    except (OSError, ValueError) as error:
        raise LitlabError(f"{path} is missing or not JSON ({error})") from error
    if payload.get("schema") != SCHEMA:
        raise LitlabError(f"{path} is not a {SCHEMA} file (schema={payload.get('schema')!r})")
    return payload


def read_table(folder: str | Path, name: str) -> list[dict[str, str]]:
    """Rows of ``tables/<name>.csv`` in a run folder (values as strings)."""
    path = Path(folder) / "tables" / f"{name}.csv"
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


def publish(folder: str | Path, target: str | Path) -> Path:
    """Copy results.json, tables/ and plots/ of ``folder`` into ``target`` (replacing what was there)."""
    folder, target = Path(folder), Path(target)
    read_results(folder)
    staging = target.with_name(f".{target.name}.staging")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    shutil.copy2(folder / "results.json", staging / "results.json")
    for sub in ("tables", "plots"):
        if (folder / sub).is_dir():
            shutil.copytree(folder / sub, staging / sub)
    for record in ("command.txt", "git.txt"):
        if (folder / record).is_file():
            shutil.copy2(folder / record, staging / record)
    if target.exists():
        shutil.rmtree(target)
    staging.replace(target)
    return target
