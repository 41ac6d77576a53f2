"""Fused or sparse compute kernels, each with a pure-torch reference beside it.

Installed as `litlab.kernels`. A clone's root on `sys.path` (`python -m ...` run there) makes this
folder importable as a bare `kernels` too, which would shadow Hugging Face's `kernels` package (a
dependency of transformers >= 5.25); a bare import is therefore handed over to that package when it
is installed.
"""

if __name__ == "kernels":
    import importlib.util
    import sys
    from pathlib import Path

    def _load_shadowed_package() -> None:
        """Replace this module in `sys.modules` by the `kernels` found on sys.path without this clone."""
        clone_root = Path(__file__).resolve().parent.parent
        search = [entry for entry in sys.path if Path(entry or ".").resolve() != clone_root]
        spec = importlib.machinery.PathFinder.find_spec("kernels", search)
        if spec is None or spec.loader is None:
            return  # nothing to shadow: stay an empty module, as transformers' availability probe expects
        module = importlib.util.module_from_spec(spec)
        sys.modules["kernels"] = module
        spec.loader.exec_module(module)

    _load_shadowed_package()
