"""The CI-sized testbed the claim test builds (kept beside it so the measurement script uses the same one)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from litlab.fitting import Fitter
from litlab.methods.fingerprint.evaluate import METHODS, read_pairs, score_pairs
from litlab.methods.fingerprint.testbed import Spec, build_testbed

CI_SPEC = Spec(
    hidden=64,
    layers=3,
    heads=4,
    vocab_size=320,
    corpus_bytes=60_000,
    block_size=32,
    batch_size=8,
    base_steps=40,
    child_steps=20,
)


def ci_testbed_rows(seeds: tuple[int, int, int], root: Path) -> list[dict[str, Any]]:
    """Score rows of a 3-base testbed: two bases on corpus half a, one on half b with d=48 (every method but
    REEF, whose inference the claim does not need)."""
    bases = [
        {"seed": seeds[0], "corpus": "a"},
        {"seed": seeds[1], "corpus": "a"},
        {"seed": seeds[2], "corpus": "b", "hidden": 48},
    ]
    methods = [m for m in METHODS if m != "reef"]
    return score_pairs(read_pairs(build_testbed(Fitter(), bases, CI_SPEC, root=root)), methods)
