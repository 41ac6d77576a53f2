"""litlab importable from a checkout without pip (the GPU machine has Python 3.12; pyproject asks for 3.11).

scripts/gpu_env.sh copies this file to <dir>/sitecustomize.py and puts <dir> and <checkout>/src on
PYTHONPATH, so every Python process (``python -m litlab.train`` subprocesses and DDP workers too) maps
litlab.callbacks, .configs, .data, .datamodules and .kernels to the checkout's top-level folders, as the
editable install's finder does. The checkout is ``LITLAB_ROOT``; a shadowed sitecustomize still runs.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from importlib.machinery import ModuleSpec, PathFinder
from pathlib import Path

FOLDERS = ("callbacks", "configs", "data", "datamodules", "kernels")


class CheckoutFinder:
    """Meta-path finder: ``litlab.<folder>`` is ``<LITLAB_ROOT>/<folder>``; sub-modules follow its path."""

    def __init__(self, root: Path) -> None:
        self.names = {f"litlab.{folder}" for folder in FOLDERS}
        self.root = str(root)

    def find_spec(self, fullname: str, path=None, target=None) -> ModuleSpec | None:
        if fullname not in self.names:
            return None
        return PathFinder.find_spec(fullname, [self.root])


def _run_next_sitecustomize() -> None:
    """Run the sitecustomize that this file shadows, if the interpreter has one."""
    here = Path(__file__).resolve().parent
    rest = [entry for entry in sys.path if Path(entry or ".").resolve() != here]
    spec = PathFinder.find_spec("sitecustomize", rest)
    if spec is not None and spec.loader is not None:
        spec.loader.exec_module(importlib.util.module_from_spec(spec))


if os.environ.get("LITLAB_ROOT"):
    sys.meta_path.insert(0, CheckoutFinder(Path(os.environ["LITLAB_ROOT"])))
_run_next_sitecustomize()
