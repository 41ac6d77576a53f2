"""How :func:`run_methods` times retrievers: interleaved per query, the fastest of ``repeats`` rounds."""

from __future__ import annotations

import time

import pytest

from litlab.datamodules.retrieval import PlantedConfig, planted_corpus
from litlab.methods.disco.evaluate import run_methods


def test_repeats_keep_the_fastest_round_and_the_first_selection() -> None:
    corpus = planted_corpus(PlantedConfig(n_docs=40, n_queries=2, seed=0))
    calls: list[str] = []
    slow_once = {"spiky": True}

    def spiky(i, q):
        calls.append("spiky")
        if slow_once["spiky"]:  # one burst of load on the first round only
            slow_once["spiky"] = False
            end = time.process_time() + 0.05
            while time.process_time() < end:
                pass
        return [len(calls)]

    def steady(i, q):
        calls.append("steady")
        return [len(calls)]

    selections, millis = run_methods(corpus, {"spiky": spiky, "steady": steady}, repeats=3)
    # Rounds: each query runs every method once before any method repeats it.
    assert calls == ["spiky", "steady"] * 6
    assert selections == {"spiky": [[1], [7]], "steady": [[2], [8]]}
    assert max(millis["spiky"]) < 10 and len(millis["spiky:wall"]) == 2


def test_repeats_must_be_positive() -> None:
    corpus = planted_corpus(PlantedConfig(n_docs=40, n_queries=1, seed=0))
    with pytest.raises(ValueError, match="repeats"):
        run_methods(corpus, {}, repeats=0)
