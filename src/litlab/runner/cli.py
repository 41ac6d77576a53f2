"""Config discovery on the full search path: litlab's configs, ``hydra.searchpath``, ``LITLAB_CONFIG_PATH``
and packages registered under the ``litlab.configs`` entry point (see ``hydra_plugins.litlab_searchpath``).

Listings read one config repository built once per command: Hydra's own ``--help`` listing rebuilds it
for every group (about a second on this project's tree).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

CONFIG_MODULE = "litlab.configs"
HIDDEN_GROUPS = ("hydra", "local")


def packaged_options(group: str) -> list[str]:
    """Options of a config group shipped with litlab (nested ones as ``<sub>/<name>``)."""
    root = Path(str(resources.files(CONFIG_MODULE))) / group
    return sorted(str(p.relative_to(root).with_suffix("")) for p in root.rglob("*.yaml"))


def searchpath_overrides(argv: Sequence[str] | None = None) -> tuple[str, ...]:
    """The ``hydra.searchpath=...`` overrides of a command line (they change what configs exist)."""
    args = sys.argv[1:] if argv is None else argv
    return tuple(arg for arg in args if arg.lstrip("+~").startswith("hydra.searchpath="))


@cache
def _repository(overrides: tuple[str, ...]) -> Any:
    """A config repository over litlab's search path plus the command line's ``hydra.searchpath``."""
    from hydra._internal.config_repository import ConfigRepository
    from hydra._internal.utils import create_config_search_path
    from hydra.core.override_parser.overrides_parser import OverridesParser

    search_path = create_config_search_path(f"pkg://{CONFIG_MODULE}")
    for override in OverridesParser.create().parse_overrides(list(overrides)):
        for entry in override.value() or []:
            search_path.append(provider="hydra.searchpath in command-line", path=str(entry))
    return ConfigRepository(config_search_path=search_path)


def all_options(group: str, argv: Sequence[str] | None = None) -> list[str]:
    """Options of ``group`` on the full search path (litlab's, the user's, registered packages')."""
    from hydra.core.object_type import ObjectType

    repo = _repository(searchpath_overrides(argv))

    def walk(path: str) -> list[str]:
        names = list(repo.get_group_options(path, ObjectType.CONFIG))
        for sub in repo.get_group_options(path, ObjectType.GROUP):
            names += [f"{sub}/{name}" for name in walk(f"{path}/{sub}")]
        return names

    return sorted(set(walk(group)))


def option_listing(group: str, argv: Sequence[str] | None = None) -> str:
    """Indented ``group=name`` lines: litlab's options, then the user's under their own heading."""
    shipped = set(packaged_options(group))
    options = all_options(group, argv)
    lines = [f"  {group}={name}" for name in options if name in shipped]
    user = [name for name in options if name not in shipped]
    if user:
        lines += ["  (yours, from the config search path)"] + [f"  {group}={name}" for name in user]
    return "\n".join(lines)


def group_listing(argv: Sequence[str] | None = None) -> str:
    """``group: option, option`` lines for every config group but experiments and tasks."""
    from hydra.core.object_type import ObjectType

    repo = _repository(searchpath_overrides(argv))
    lines = []

    def walk(path: str) -> None:
        options = sorted(repo.get_group_options(path, ObjectType.CONFIG))
        if options:
            lines.append(f"{path}: {', '.join(options)}")
        for sub in sorted(repo.get_group_options(path, ObjectType.GROUP)):
            walk(f"{path}/{sub}")

    for group in sorted(repo.get_group_options("", ObjectType.GROUP)):
        if group not in HIDDEN_GROUPS + ("experiment", "task"):
            walk(group)
    return "\n".join(lines)


HELP_HEADER = """litlab: ICLR 2026 papers as runnable Lightning + Hydra experiments.
  litlab-train experiment=<paper>/<name> [key=value ...]   fit, then test
  litlab-eval  experiment=<paper>/<name> ckpt_path=<file>  test a checkpoint
  litlab-run   task=<paper>/<name> [key=value ...]         studies, analyses and pipelines
Multirun: add -m and comma-separated values (model/kan/init=glorot,baseline seed=0,1,2).
Your own configs: hydra.searchpath=[file:///path/to/configs], LITLAB_CONFIG_PATH, or a package
registered under the litlab.configs entry point (README, "Your own experiments")."""

HELP_FOOTER = """Any key can be overridden (key=value); show the composed config with --cfg job.
Hydra's own flags: --hydra-help.  Docs: README.md and src/litlab/methods/<paper>/README.md"""


def help_text(argv: Sequence[str] | None = None) -> str:
    """``--help``: the commands, every experiment and task (yours apart), and the other config groups."""
    return "\n\n".join(
        [
            HELP_HEADER,
            "== Experiments (litlab-train / litlab-eval) ==\n" + option_listing("experiment", argv),
            "== Tasks (litlab-run) ==\n" + option_listing("task", argv),
            "== Config groups (choose one of each with group=option) ==\n" + group_listing(argv),
            HELP_FOOTER,
        ]
    )
