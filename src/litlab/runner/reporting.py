"""Failures end with one clear console line; the run's log keeps the full traceback as evidence."""

from __future__ import annotations

import logging
import math
import os
import sys
from collections.abc import Callable
from typing import Any

from litlab.core.errors import ConfigError, explain

log = logging.getLogger("litlab")
# Records of this logger go to the run folder's log file only (configs/hydra/default.yaml).
evidence = logging.getLogger("litlab.evidence")


def in_multirun() -> bool:
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    return HydraConfig.initialized() and HydraConfig.get().mode == RunMode.MULTIRUN


def fail(message: str, code: int) -> None:
    """Print ``litlab: <message>`` to stderr and exit with ``code``."""
    print(f"litlab: {message}", file=sys.stderr, flush=True)
    sys.exit(code)


def run_reporting_errors(fn: Callable[..., Any], *args: Any) -> Any:
    """Call ``fn``; on failure print one line, log the traceback to the run log, and exit non-zero.

    Config errors exit 2, other failures 1. In a multirun a failed trial returns NaN so that the sweep
    (grid or Optuna) goes on. ``LITLAB_TRACEBACK=1`` also prints the traceback on the console.
    """
    try:
        return fn(*args)
    except KeyboardInterrupt:
        evidence.error("interrupted", exc_info=True)
        fail("interrupted; the run folder keeps everything written so far", 130)
    except Exception as error:
        message = explain(error)
        evidence.error("litlab: %s", message, exc_info=True)
        if os.environ.get("LITLAB_TRACEBACK") == "1":
            log.exception("full traceback")
        if in_multirun():
            print(f"litlab: {message}", file=sys.stderr, flush=True)
            print("litlab: this trial failed; the sweep continues and records NaN for it", file=sys.stderr)
            return math.nan
        fail(message, 2 if isinstance(error, ConfigError) else 1)
