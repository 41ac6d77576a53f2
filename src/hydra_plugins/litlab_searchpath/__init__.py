"""Hydra plugin: users' config folders on litlab's search path, without forking litlab.

``LITLAB_CONFIG_PATH`` (folders or ``pkg://module`` entries, separated by ``os.pathsep``) and every
package that registers its config module under the ``litlab.configs`` entry point group, e.g. in a
user's pyproject.toml::

    [project.entry-points."litlab.configs"]
    mylab = "mylab.configs"

are appended to the search path of the litlab apps (litlab-train, -eval, -run), after litlab's own.
"""

from __future__ import annotations

import os
from importlib.metadata import entry_points
from pathlib import Path

from hydra.core.config_search_path import ConfigSearchPath
from hydra.plugins.search_path_plugin import SearchPathPlugin

ENV = "LITLAB_CONFIG_PATH"
GROUP = "litlab.configs"


def user_search_path() -> list[tuple[str, str]]:
    """(provider, path) pairs from ``LITLAB_CONFIG_PATH`` and the ``litlab.configs`` entry points."""
    found = []
    for entry in filter(None, os.environ.get(ENV, "").split(os.pathsep)):
        path = entry if "://" in entry else f"file://{Path(entry).expanduser().resolve()}"
        found.append((ENV, path))
    for point in entry_points(group=GROUP):
        found.append((f"{GROUP} entry point {point.name}", f"pkg://{point.value}"))
    return found


class LitlabSearchPathPlugin(SearchPathPlugin):
    """Appends the user's config folders to the search path of litlab's apps (and no other app)."""

    def manipulate_search_path(self, search_path: ConfigSearchPath) -> None:
        if not any(element.path == "pkg://litlab.configs" for element in search_path.get_path()):
            return
        for provider, path in user_search_path():
            search_path.append(provider=provider, path=path)
