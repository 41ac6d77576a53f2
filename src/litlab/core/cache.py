"""Caches of generated data that are data, not code: tensors in safetensors, metadata in JSON.

A cache entry is keyed by its generator's version and by the config that made it, so changing either
builds a new one. Nothing is unpickled: a planted or corrupted file is rebuilt with a warning, never run.
A tensor entry that ships with litlab (``data/<family>/<its file name>``) is read from there instead of
built, so a fresh clone skips the minutes some base models take to train.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from litlab.core.paths import cache_dir, key_digest, shipped_data_dir

log = logging.getLogger("litlab")


def cached_tensors(
    family: str,
    name: str,
    version: str,
    key: Mapping[str, Any],
    build: Callable[[], Mapping[str, Any]],
) -> dict[str, Any]:
    """The tensors ``build()`` returns, cached under ``<cache>/<family>/<name>-<digest>.safetensors``.

    ``build`` returns a dict of tensors (numpy arrays are converted); ``version`` names the generator's
    revision (bump it when the generator changes). A file that cannot be read, or whose metadata does not
    match, is rebuilt with a warning. Before building, the same file name under ``data/<family>/`` (an
    entry shipped with litlab) is tried.
    """
    import torch
    from safetensors.torch import save_file

    full_key = {"name": name, "version": version, "key": dict(key)}
    path = cache_dir(family) / f"{name}-{key_digest(full_key)}.safetensors"
    for candidate in (path, shipped_data_dir(family) / path.name):
        if candidate.exists() and (stored := _read_tensors(candidate, _key_text(full_key))) is not None:
            return stored
    tensors = {k: v if isinstance(v, torch.Tensor) else torch.as_tensor(v) for k, v in build().items()}
    tensors = {k: v.contiguous() for k, v in tensors.items()}
    write_atomic(path, lambda tmp: save_file(tensors, tmp, metadata={"litlab_key": _key_text(full_key)}))
    return tensors


def _read_tensors(path: Path, key_text: str) -> dict[str, Any] | None:
    """The tensors in ``path`` if its metadata holds ``key_text``; None, with a warning, otherwise."""
    from safetensors import safe_open

    try:
        with safe_open(path, framework="pt") as handle:
            if (handle.metadata() or {}).get("litlab_key") == key_text:
                return {name: handle.get_tensor(name) for name in handle.keys()}  # noqa: SIM118
        log.warning("cache %s was made by another generator version or config; rebuilding it", path)
    except Exception as error:  # a truncated or foreign file: rebuild, never trust it
        log.warning("cache %s is unreadable (%s); rebuilding it", path, error)
    return None


def cached_json(
    family: str, name: str, version: str, key: Mapping[str, Any], build: Callable[[], Any]
) -> Any:
    """Like :func:`cached_tensors` for a JSON-able value."""
    full_key = {"name": name, "version": version, "key": dict(key)}
    path = cache_dir(family) / f"{name}-{key_digest(full_key)}.json"
    if path.exists():
        try:
            stored = json.loads(path.read_text())
            if stored.get("key") == json.loads(json.dumps(full_key, default=str)):
                return stored["value"]
        except (OSError, ValueError, AttributeError) as error:
            log.warning("cache %s is unreadable (%s); rebuilding it", path, error)
    value = build()
    text = json.dumps({"key": full_key, "value": value}, default=str)
    write_text_atomic(path, text)
    return value


def _key_text(key: Mapping[str, Any]) -> str:
    return json.dumps(key, sort_keys=True, default=str)


def write_text_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` whole or not at all (a killed process leaves the old file or none)."""
    write_atomic(path, lambda tmp: Path(tmp).write_text(text))


def write_npz_atomic(path: Path, arrays: Mapping[str, Any], compressed: bool = True) -> None:
    """Save ``arrays`` as one ``.npz`` file at ``path`` whole or not at all (see :func:`write_atomic`)."""
    import numpy as np

    def save(tmp: str) -> None:
        with open(tmp, "wb") as handle:  # a handle: given a name, numpy would append ".npz" to it
            (np.savez_compressed if compressed else np.savez)(handle, **arrays)

    write_atomic(path, save)


def write_atomic(path: Path, write: Callable[[str], None]) -> None:
    """Call ``write(tmp)`` on a temporary file of its own in ``path``'s folder, then rename it over ``path``.

    A killed process leaves the old file or none, and concurrent writers of the same cache entry (two runs
    side by side) never share a temporary name: the last rename wins, and every reader sees a whole file.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        write(tmp)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
