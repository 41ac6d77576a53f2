"""Checks on the command line that Hydra's own messages do not make clear enough."""

from __future__ import annotations

import sys
from importlib import resources
from pathlib import Path


def group_options(group: str) -> list[str]:
    """Every option of a packaged config group, nested ones as ``<sub>/<name>``."""
    root = Path(str(resources.files("litlab.configs"))) / group
    return sorted(str(p.relative_to(root).with_suffix("")) for p in root.rglob("*.yaml"))


def check_group_choice(group: str, argv: list[str] | None = None) -> None:
    """Exit with the list of valid options when ``group=<name>`` names one that does not exist."""
    for arg in sys.argv[1:] if argv is None else argv:
        key, sep, value = arg.lstrip("+~").partition("=")
        if sep and key == group and value not in ("null", "") and "," not in value:
            options = group_options(group)
            if value not in options:
                listing = "\n".join(f"  {group}={name}" for name in options)
                sys.stderr.write(f"litlab: unknown {group} {value!r}. Available:\n{listing}\n")
                sys.exit(2)
