"""A few lines from the JSON files of scripts/gpu_session.sh: what passed, and the headline timings.

Run:  python scripts/gpu_summary.py <out folder>
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any


def _load(folder: Path, name: str) -> dict[str, Any] | None:
    path = folder / name
    return json.loads(path.read_text()) if path.exists() else None


def gpu_check(result: dict[str, Any]) -> list[str]:
    lines = [
        f"gpu_check: all_ok={result.get('all_ok')} on {result.get('device')} (torch {result.get('torch')})"
    ]
    for name, record in result.items():
        if isinstance(record, dict) and "ok" in record:
            lines.append(f"  {name}: {'ok' if record['ok'] else 'FAILED'} {record.get('seconds')} s")
    for name, record in result.get("kernels", {}).items():
        lines.append(
            f"  kernel {name}: {'ok' if record['ok'] else 'FAILED'} {record.get('max_errors', record)}"
        )
    return lines


def sparsed(result: dict[str, Any]) -> list[str]:
    lines = [f"sparsed: errors vs dense {result['errors_vs_dense']}"]
    for row in result["rows"]:
        timings = ", ".join(
            f"{name} {row[f'{name}_ms']:.2f}" for name in ("sdpa", "flex", "triton", "gather")
        )
        lines.append(f"  L={row['length']}: ms {timings}")
    return lines


def skyevents(result: dict[str, Any]) -> list[str]:
    lines = [f"skyevents: rasterize vs dense {result['rasterize_vs_dense_max_error_48x64']}"]
    for name, row in result["views"].items():
        lines.append(
            f"  {name}: ms forward {row['forward_ms']:.2f}, forward+backward {row['forward_backward_ms']:.2f}"
        )
    return lines


def trainer_overhead(result: dict[str, Any]) -> list[str]:
    return [
        f"trainer_overhead {row['mode']} {row['size']}: ratio to hand {row['ratio_to_hand']}"
        for row in result["rows"]
    ]


def main() -> None:
    folder = Path(sys.argv[1])
    parts = {
        "gpu_check.json": gpu_check,
        "sparsed_gpu_speed.json": sparsed,
        "skyevents_gpu.json": skyevents,
        "trainer_overhead_gpu.json": trainer_overhead,
    }
    for name, summarise in parts.items():
        result = _load(folder, name)
        if result is None:
            print(f"{name}: missing")
            continue
        try:
            print("\n".join(summarise(result)))
        except (KeyError, TypeError) as error:
            print(f"{name}: unreadable ({type(error).__name__}: {error})")


if __name__ == "__main__":
    main()
