"""Sweep specs cannot drift from the configs; a failing trial does not end a sweep."""

from __future__ import annotations

import math
from importlib import resources
from pathlib import Path

import pytest
import yaml
from hydra import compose, initialize_config_module
from hydra.core.global_hydra import GlobalHydra
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf

from litlab.core.errors import ConfigError
from litlab.runner.sweeps import (
    check_sweep_spec,
    compose_train,
    has_wandb_logger,
    parameter_values,
    sweep_points,
)
from tests.conftest import experiment_names, run_cli
from tests.scale.conftest import RUNS, WORKLOAD, results

CONFIGS = Path(str(resources.files("litlab.configs")))
SWEEPS = sorted((CONFIGS / "sweep").rglob("*.yaml"))
# Specs whose program is litlab-run sweep a task's parameters (task.*); the others sweep an experiment.
TASK_SWEEPS = [p for p in SWEEPS if yaml.safe_load(p.read_text())["program"] == "litlab-run"]


def test_there_is_a_sweep_for_the_kan_init_grid() -> None:
    assert CONFIGS / "sweep" / "kan" / "init_grid.yaml" in SWEEPS


@pytest.mark.parametrize(
    "path", [p for p in SWEEPS if p not in TASK_SWEEPS], ids=lambda p: str(p.relative_to(CONFIGS / "sweep"))
)
def test_wandb_sweep_spec_composes_with_every_value(path: Path) -> None:
    spec = yaml.safe_load(path.read_text())
    experiment = next(arg.split("=", 1)[1] for arg in spec["command"] if arg.startswith("experiment="))
    assert experiment in experiment_names()
    longest = max(len(parameter_values(parameter)) for parameter in spec["parameters"].values())
    assert check_sweep_spec(path) == 1 + longest


def compose_run(overrides: list[str]) -> DictConfig:
    """``litlab-run``'s config for ``overrides``, as its entry point composes it."""
    GlobalHydra.instance().clear()
    try:
        with initialize_config_module(config_module="litlab.configs", version_base="1.3"):
            return compose("run", overrides=overrides)
    finally:
        GlobalHydra.instance().clear()


@pytest.mark.parametrize("path", TASK_SWEEPS, ids=lambda p: str(p.relative_to(CONFIGS / "sweep")))
def test_task_sweep_spec_composes_with_every_value(path: Path) -> None:
    spec = yaml.safe_load(path.read_text())
    command = spec["command"]
    assert command[0] == "litlab-run" and command[-1] == "${args_no_hyphens}" and "hydra.mode=RUN" in command
    fixed = command[1:-1]
    assert has_wandb_logger(compose_run(fixed)), "without a wandb logger the sweep never sees its metric"
    assert f"optimized_metric={spec['metric']['name']}" in fixed
    assert all(name.startswith("task.") for name in spec["parameters"]), f"{path}: a task sweep varies task.*"
    values = {name: parameter_values(parameter) for name, parameter in spec["parameters"].items()}
    for point in sweep_points(values):
        cfg = compose_run([*fixed, *(f"{name}={value}" for name, value in point.items())])
        assert {name: OmegaConf.select(cfg, name) for name in point} == point


def test_sweep_points_take_every_value_of_every_parameter_in_as_many_points_as_the_longest_list() -> None:
    points = sweep_points({"a": [1, 2, 3], "b": ["x", "y"], "c": [0.5]})
    assert points == [
        {"a": 1, "b": "x", "c": 0.5},
        {"a": 2, "b": "y", "c": 0.5},
        {"a": 3, "b": "x", "c": 0.5},
    ]
    assert sweep_points({}) == []


def test_a_spec_without_a_wandb_logger_is_a_clear_error(tmp_path: Path) -> None:
    spec = yaml.safe_load((CONFIGS / "sweep" / "kan" / "init_grid.yaml").read_text())
    spec["command"].remove("logger=wandb")
    (tmp_path / "no_logger.yaml").write_text(yaml.safe_dump(spec))
    with pytest.raises(ConfigError, match="add logger=wandb"):
        check_sweep_spec(tmp_path / "no_logger.yaml")


def test_a_drifted_spec_is_a_clear_error(tmp_path: Path) -> None:
    spec = yaml.safe_load((CONFIGS / "sweep" / "kan" / "init_grid.yaml").read_text())
    spec["parameters"]["model.net.widht"] = {"values": [4]}
    (tmp_path / "drifted.yaml").write_text(yaml.safe_dump(spec))
    with pytest.raises(Exception, match="widht"):
        check_sweep_spec(tmp_path / "drifted.yaml")


HPARAMS = {
    "kan/optuna": ["kan/function_fit", "kan/feynman"],
    "kan/pinn_optuna": ["kan/pde_burgers", "kan/pde_allen_cahn", "kan/pde_helmholtz"],
}


@pytest.mark.parametrize(("search", "experiment"), [(s, e) for s, es in HPARAMS.items() for e in es])
def test_hparams_search_params_exist_in_the_experiment(search: str, experiment: str) -> None:
    cfg = compose_train([f"experiment={experiment}", f"hparams_search={search}"])
    assert cfg.hydra.mode == RunMode.MULTIRUN
    assert cfg.optimized_metric == "test/rel_l2"
    for key in cfg.hydra.sweeper.params:
        assert OmegaConf.select(cfg, key) is not None, f"{search} searches {key}, absent from {experiment}"


def test_every_kan_experiment_has_an_hparams_search() -> None:
    kan = {name for name in experiment_names() if name.startswith("kan/") and name != "kan/init_grid"}
    assert kan == {e for es in HPARAMS.values() for e in es}


@pytest.mark.slow
def test_a_failing_trial_records_nan_and_the_sweep_goes_on(tmp_path: Path) -> None:
    # Trial 0 asks for one sample, which cannot be split into train and validation sets.
    overrides = ["trainer.max_epochs=5", "data.n_samples=1,400", "run_id=nan"]
    result = run_cli(["litlab-train", "-m", *WORKLOAD, *overrides], tmp_path, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "this trial failed; the sweep continues and records NaN" in result.stderr
    sweep = tmp_path / RUNS / "multirun" / "nan"
    assert not (sweep / "0" / "results.json").exists()
    assert math.isfinite(results(sweep / "1")["value"])
