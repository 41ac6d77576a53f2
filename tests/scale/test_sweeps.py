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

from tests.conftest import experiment_names, run_cli
from tests.scale.conftest import RUNS, WORKLOAD, results

CONFIGS = Path(str(resources.files("litlab.configs")))
SWEEPS = sorted((CONFIGS / "sweep").rglob("*.yaml"))
SCALAR = (str, int, float, bool)


def compose_train(overrides: list[str]) -> DictConfig:
    GlobalHydra.instance().clear()
    with initialize_config_module(config_module="litlab.configs", version_base="1.3"):
        return compose("train", overrides=overrides, return_hydra_config=True)


def parameter_values(spec: dict) -> list:
    """The values a wandb parameter can take that composition should try: each listed one, or the bounds."""
    if "values" in spec:
        return list(spec["values"])
    if "value" in spec:
        return [spec["value"]]
    return [spec["min"], spec["max"]]


def test_there_is_a_sweep_for_the_kan_init_grid() -> None:
    assert CONFIGS / "sweep" / "kan" / "init_grid.yaml" in SWEEPS


@pytest.mark.parametrize("path", SWEEPS, ids=lambda p: str(p.relative_to(CONFIGS / "sweep")))
def test_wandb_sweep_spec_composes_with_every_value(path: Path) -> None:
    spec = yaml.safe_load(path.read_text())
    assert spec["method"] in {"grid", "random", "bayes"}
    command = spec["command"]
    assert command[0] == "litlab-train" and command[-1] == "${args_no_hyphens}"
    fixed = command[1:-1]
    experiment = next(arg.split("=", 1)[1] for arg in fixed if arg.startswith("experiment="))
    assert experiment in experiment_names()
    base = compose_train(fixed)
    logged = {base.get("optimized_metric"), OmegaConf.select(base, "callbacks.model_checkpoint.monitor")}
    assert spec["metric"]["name"] in logged, "metric.name must be a key the experiment logs"
    assert base.hydra.mode != RunMode.MULTIRUN, "each wandb run is one run, not a Hydra multirun"
    for name, parameter in spec["parameters"].items():
        assert set(parameter) <= {"values", "value", "min", "max", "distribution"}, name
        for value in parameter_values(parameter):
            assert isinstance(value, SCALAR), f"{name}: only scalar and config-group values"
            cfg = compose_train([*fixed, f"{name}={value}"])
            if "/" in name:
                assert cfg.hydra.runtime.choices[name] == value
            else:
                assert OmegaConf.select(cfg, name) == value, f"{name}={value} did not reach the config"


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
