"""Where offline data lives and where derived files may be written.

Data is looked up, in order, in an explicit ``root``, in ``$LITLAB_DATA_ROOT/<family>`` and in the
repository's sibling ``../shared/data/<family>`` (the project's offline copy). Shared data folders may be
read-only, so anything a loader derives from them (processed tensors, caches) goes under
``$LITLAB_CACHE`` (default ``~/.cache/litlab``).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

DATA_ROOT_ENV = "LITLAB_DATA_ROOT"
CACHE_ENV = "LITLAB_CACHE"
REPO_ROOT = Path(__file__).resolve().parents[1]


def data_root_candidates(family: str, root: str | os.PathLike | None = None) -> list[Path]:
    """Folders that may hold data of ``family`` (``graphs``, ``feynman`` ...), most specific first.

    ``root`` (if given) comes first; then ``$LITLAB_DATA_ROOT/<family>``; then the repository's sibling
    ``../shared/data/<family>``. Duplicates are dropped; nothing is checked for existence.
    """
    candidates = [Path(root).expanduser()] if root is not None else []
    env = os.environ.get(DATA_ROOT_ENV)
    if env:
        candidates.append(Path(env).expanduser() / family)
    candidates.append(REPO_ROOT.parent / "shared" / "data" / family)
    unique: list[Path] = []
    for path in candidates:
        if path not in unique:
            unique.append(path)
    return unique


def find_data(family: str, relative: str | os.PathLike, root: str | os.PathLike | None = None) -> Path | None:
    """The first candidate folder (see ``data_root_candidates``) in which ``relative`` is a file or a
    folder holding at least one file, or None."""
    for candidate in data_root_candidates(family, root):
        path = candidate / relative
        if path.is_file() or (path.is_dir() and any(p.is_file() for p in path.iterdir())):
            return candidate
    return None


def cache_dir(family: str, source: str | os.PathLike | None = None) -> Path:
    """A writable folder ``$LITLAB_CACHE/<family>[/<hash of source>]`` (created) for derived files.

    Keying by the source folder keeps caches built from different copies of a data set apart.
    """
    base = Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "litlab").expanduser() / family
    if source is not None:
        base = base / hashlib.sha1(str(Path(source).resolve()).encode()).hexdigest()[:10]
    base.mkdir(parents=True, exist_ok=True)
    return base
