"""The ``--smoke`` size of the benchmarks: the smallest run through every code path, which
tests/test_benchmarks.py runs so that a benchmark cannot rot unnoticed. Its numbers mean nothing, so it
writes ``<name>_smoke.json`` (git-ignored) and never the committed results.
"""

from __future__ import annotations

import argparse

SMOKE_HELP = "smallest sizes, to check that it runs (numbers mean nothing; writes <name>_smoke.json)"


def suffix(args: argparse.Namespace) -> str:
    """The result file's suffix: ``_smoke``, ``_quick`` or none."""
    return "_smoke" if args.smoke else "_quick" if getattr(args, "quick", False) else ""
