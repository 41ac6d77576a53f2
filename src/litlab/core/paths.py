"""Where data is read from and where derived files are cached: one rule for the whole project.

Data of a family (``graphs``, ``feynman``, ``text`` ...) is looked up, in order, in an explicit ``root``
(``data.root=``; when given, only there), in ``$LITLAB_DATA_ROOT/<family>``, and in the small real data
sets shipped with litlab (the repository's ``data/<family>``, installed as ``litlab.data``). Loaders
that can download do so into ``cache_dir(family)`` when none of these has the files. Data folders may
be read-only, so everything derived from them goes under ``$LITLAB_CACHE`` (default ``~/.cache/litlab``).
"""

from __future__ import annotations

import hashlib
import json
import os
from importlib import resources
from pathlib import Path
from typing import Any

from litlab.core.errors import ConfigError, LitlabError

DATA_ROOT_ENV = "LITLAB_DATA_ROOT"
CACHE_ENV = "LITLAB_CACHE"


def shipped_data_dir(family: str) -> Path:
    """The folder of ``family`` among the data sets shipped with litlab (it may not exist)."""
    return Path(str(resources.files("litlab.data"))) / family


def data_root_candidates(family: str, root: str | os.PathLike | None = None) -> list[Path]:
    """Folders that may hold data of ``family``, most specific first.

    An explicit ``root`` is the only candidate, and must exist (a mistyped ``data.root`` must not fall
    back silently to another copy); otherwise ``$LITLAB_DATA_ROOT/<family>`` then the shipped copy.
    """
    if root is not None:
        path = Path(root).expanduser()
        if not path.exists():
            raise ConfigError(f"data.root={root} does not exist; give an existing folder or leave it unset")
        return [path]
    candidates = []
    env = os.environ.get(DATA_ROOT_ENV)
    if env:
        candidates.append(Path(env).expanduser() / family)
    candidates.append(shipped_data_dir(family))
    return candidates


def find_data(family: str, relative: str | os.PathLike, root: str | os.PathLike | None = None) -> Path | None:
    """The first candidate folder in which ``relative`` is a file or a non-empty folder, or None."""
    for candidate in data_root_candidates(family, root):
        path = candidate / relative
        if path.is_file() or (path.is_dir() and any(p.is_file() for p in path.rglob("*"))):
            return candidate
    return None


def missing_data_error(
    family: str, relative: str | os.PathLike, root: str | os.PathLike | None = None, also: str = ""
) -> LitlabError:
    """The one-line error for data found nowhere, naming every place that was tried."""
    looked = ", ".join(str(c / relative) for c in data_root_candidates(family, root))
    extra = f"; {also}" if also else ""
    return LitlabError(
        f"{relative} not found; looked in: {looked}{extra}. Give data.root=<folder> or export "
        f"{DATA_ROOT_ENV}=<folder with a {family}/ subfolder>"
    )


def cache_root() -> Path:
    """``$LITLAB_CACHE``, else ``~/.cache/litlab``."""
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "litlab").expanduser()


def key_digest(key: Any, length: int = 12) -> str:
    """A short, stable hash of a JSON-able key (a config dict, a source path, a version)."""
    text = json.dumps(key, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:length]


def cache_dir(family: str, key: Any = None) -> Path:
    """A writable folder ``<cache root>/<family>[/<digest of key>]``, created on first use.

    Keying by the source (a data folder, a config, a generator version) keeps caches built from
    different inputs apart.
    """
    base = cache_root() / family
    if key is not None:
        if isinstance(key, str | os.PathLike) and Path(key).exists():
            key = str(Path(key).resolve())
        base = base / key_digest(key, 10)
    base.mkdir(parents=True, exist_ok=True)
    return base
