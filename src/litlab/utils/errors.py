"""Turn failures into one clear line that says what to do, and a non-zero exit."""

from __future__ import annotations

import logging
import math
import os
import re
import sys
from collections.abc import Callable
from typing import Any

from hydra.core.hydra_config import HydraConfig
from hydra.errors import InstantiationException
from hydra.types import RunMode
from omegaconf.errors import OmegaConfBaseException

log = logging.getLogger("litlab")


class LitlabError(Exception):
    """An error whose message already tells the user what to do (no traceback needed)."""


def explain(error: BaseException) -> str:
    """A one-line, actionable description of ``error``."""
    if isinstance(error, InstantiationException) and error.__cause__ is not None:
        target = re.search(r"target '([^']+)'", str(error))
        return f"{explain(error.__cause__)} (while building {target.group(1) if target else 'an object'})"
    if isinstance(error, LitlabError | FileNotFoundError):
        return str(error)
    text = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    if isinstance(error, OmegaConfBaseException):
        return f"config error: {text}. Check the key and its type with --cfg job."
    if isinstance(error, RuntimeError) and "state_dict" in str(error):
        return (
            f"the checkpoint does not fit this model ({text}). Use a checkpoint written by the same "
            "experiment and model config."
        )
    if isinstance(error, RuntimeError) and "shape" in str(error).lower():
        return f"shape mismatch: {text}. Check that data and model sizes in the config agree."
    return f"{type(error).__name__}: {text}"


def _in_multirun() -> bool:
    return HydraConfig.initialized() and HydraConfig.get().mode == RunMode.MULTIRUN


def run_reporting_errors(fn: Callable[..., Any], *args: Any) -> Any:
    """Call ``fn``; on failure log one clear line. Single runs exit 1; multirun trials return NaN.

    Returning NaN keeps an Optuna or grid sweep going when one trial diverges or is misconfigured.
    Set LITLAB_TRACEBACK=1 to see the full traceback.
    """

    try:
        return fn(*args)
    except KeyboardInterrupt:
        print("litlab: interrupted; the run folder keeps everything written so far", file=sys.stderr)
        sys.exit(130)
    except Exception as error:
        if os.environ.get("LITLAB_TRACEBACK") == "1":
            log.exception("full traceback")
        message = f"litlab: {explain(error)}"
        log.debug(message)
        print(message, file=sys.stderr, flush=True)
        if _in_multirun():
            print("litlab: this trial failed; the sweep continues and records NaN for it", file=sys.stderr)
            return math.nan
        sys.exit(1)
