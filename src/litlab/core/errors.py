"""Errors that already say what to do, and a one-line explanation of any other failure."""

from __future__ import annotations

import errno
import re


class LitlabError(Exception):
    """An error whose message tells the user what to do (the console shows it without a traceback)."""


class ConfigError(LitlabError):
    """A config value that cannot work (wrong type, out of range, unknown name); found before any work."""


# Optional packages (import name -> the litlab extra that installs them), as declared in pyproject.toml.
OPTIONAL_PACKAGES = {
    "transformers": "lm",
    "tokenizers": "lm",
    "highway_env": "drive",
    "torchdiffeq": "flow",
    "kan": "bench",
    "interpret": "tpnn",
    "xgboost": "tpnn",
    "pymc": "tpnn",
    "pymc_bart": "tpnn",
    "densratio": "dre",
    "faiss": "disco",
    "trl": "rl",
    "datasketch": "webscale_rl",
    "gsplat": "splat",
}


def explain(error: BaseException) -> str:
    """A one-line, actionable description of ``error``, decided by its type and fields, not its text."""
    from hydra.errors import InstantiationException
    from omegaconf.errors import OmegaConfBaseException

    if isinstance(error, InstantiationException) and error.__cause__ is not None:
        target = re.search(r"target '([^']+)'", str(error))
        return f"{explain(error.__cause__)} (while building {target.group(1) if target else 'an object'})"
    if isinstance(error, LitlabError) or (isinstance(error, OSError) and error.errno is None):
        return str(error)
    if isinstance(error, ModuleNotFoundError) and (error.name or "").split(".")[0] in OPTIONAL_PACKAGES:
        package = (error.name or "").split(".")[0]
        extra = OPTIONAL_PACKAGES[package]
        return (
            f"this needs the optional package {package!r}: pip install 'litlab[{extra}]' "
            "(or `make install`, which installs every extra)"
        )
    if isinstance(error, OSError) and error.errno is not None:
        return _explain_os_error(error)
    text = _first_line(error)
    cause = error.__cause__ or error.__context__
    if isinstance(error, OmegaConfBaseException) and isinstance(cause, LitlabError | OSError):
        return explain(cause)
    if isinstance(error, OmegaConfBaseException):
        return f"config error: {text}. Check the key and its type with --cfg job."
    return f"{type(error).__name__}: {text}"


def _explain_os_error(error: OSError) -> str:
    where = error.filename or "a file"
    if error.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return (
            f"cannot write {where}: {error.strerror}. Choose a writable folder "
            "(paths.log_dir=<folder>, or run from a folder you own)"
        )
    if error.errno == errno.ENOSPC:
        return f"the disk is full while writing {where}; free space or set paths.log_dir=<other disk>"
    if error.errno == errno.ENOENT:
        return f"{where} does not exist"
    return f"{type(error).__name__}: {error.strerror or _first_line(error)} ({where})"


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__
