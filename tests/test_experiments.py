"""Every experiment config composes and runs one batch of train/val/test (fast_dev_run), and its header's
``# Paper scale`` line composes to the values it names."""

from __future__ import annotations

import itertools
import re
import shlex
from pathlib import Path

import pytest
from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import Container, OmegaConf

from litlab.train import train
from tests.conftest import CONFIGS, experiment_names

# Experiments whose data preparation is itself a long job when the cache is cold: crosstok trains its teacher
# LM (about 40 s of CPU), skyevents simulates its flight (15-25 s, shared by the experiments of one flight
# through the cache, but whichever runs first pays it). Their one-step run is an end-to-end run over 20 s, so
# it belongs to the slow suite (make test; test-fast keeps the skyevents module and data tests).
SKYEVENTS = ("rer", "rgb_only", "whole_frame", "gs_rer", "gs_rgb_only", "gs_whole_frame")
SLOW_DATA_PREPARATION = {"crosstok/distill"} | {f"skyevents/{name}" for name in SKYEVENTS}


def test_experiment_list_is_not_empty() -> None:
    assert "kan/function_fit" in experiment_names()
    assert set(experiment_names()) >= SLOW_DATA_PREPARATION  # a renamed experiment is not silently fast


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(name, marks=pytest.mark.slow) if name in SLOW_DATA_PREPARATION else name
        for name in experiment_names()
    ],
)
def test_experiment_runs_one_step(name: str, compose_config) -> None:
    overrides = [f"experiment={name}", "debug=fdr", "trainer.detect_anomaly=false"]
    cfg = compose_config("train", overrides)
    train(cfg)


# Each experiment's header names the paper's scale in one line, "# Paper scale[ (note)]: <overrides>":
# Hydra overrides appended to `litlab-train experiment=<name>`; <...> placeholders stand for what only a user
# has (a recording, a checkpoint), and the note before the colon must then say so.
CONFIG_DIR = Path(str(CONFIGS))  # the installed configs as a plain path
EXPERIMENTS = CONFIG_DIR / "experiment"
PLACEHOLDER = re.compile(r"<[^>]*>")


def header_lines(name: str) -> list[str]:
    """The leading block of ``#`` lines of ``configs/experiment/<name>.yaml``."""
    lines = (EXPERIMENTS / f"{name}.yaml").read_text(encoding="utf-8").splitlines()
    return list(itertools.takewhile(lambda line: line.startswith("#"), lines))


def paper_scale_overrides(name: str) -> list[str]:
    """The overrides of the header's one ``# Paper scale`` line, without placeholders and shell quotes."""
    lines = [line for line in header_lines(name) if line.startswith("# Paper scale")]
    assert len(lines) == 1, f"{name}: {len(lines)} header lines start with '# Paper scale' (one expected)"
    note, colon, rest = lines[0].partition(": ")
    assert colon, f"{name}: the '# Paper scale' line has no ': ' before its overrides"
    tokens = shlex.split(rest)
    overrides = [token for token in tokens if not PLACEHOLDER.search(token)]
    if len(overrides) < len(tokens):
        assert "(" in note, f"{name}: a placeholder on the Paper scale line needs its reason before the colon"
    assert overrides, f"{name}: the Paper scale line names no override"
    return overrides


def _is_group(key: str) -> bool:
    """A config group (``trainer=gpu``, ``model/kan/init=power``): its value names a file, not a value."""
    return "/" in key or (CONFIG_DIR / key).is_dir()


@pytest.mark.parametrize("name", experiment_names())
def test_paper_scale_line_composes(name: str, compose_config) -> None:
    overrides = paper_scale_overrides(name)
    parsed = OverridesParser.create().parse_overrides(overrides)
    sweeps = [o.input_line for o in parsed if o.is_sweep_override()]
    assert not sweeps, f"{name}: the Paper scale line is one run, not a sweep: {sweeps}"
    cfg = compose_config("train", [f"experiment={name}", *overrides])
    for override in parsed:
        key = override.key_or_group
        if _is_group(key) or key.startswith("hydra."):
            continue
        value = OmegaConf.select(cfg, key, default=KeyError)
        if isinstance(value, Container):
            value = OmegaConf.to_container(value, resolve=True)
        assert value == override.value(), f"{name}: {override.input_line} gives {key}={value!r}"
