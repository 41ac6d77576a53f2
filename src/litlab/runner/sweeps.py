"""Check a wandb sweep spec against the configs it names, on the full config search path.

A spec runs ``litlab-train <fixed overrides> ${args_no_hyphens}`` with one value per parameter; this
composes the fixed overrides with every listed value (or both bounds of a range), so a spec cannot
name a key, a group option or a metric that does not exist. Users check their own specs the same way:
``check_sweep_spec("configs/sweep/mylab/width.yaml")`` (their configs found as ``litlab-train`` finds them).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml
from omegaconf import DictConfig, OmegaConf

from litlab.core.errors import ConfigError
from litlab.runner.resolvers import register_hydra_extensions

METHODS = ("grid", "random", "bayes")
PARAMETER_KEYS = {"values", "value", "min", "max", "distribution"}
SCALAR = (str, int, float, bool)


def compose_train(overrides: Sequence[str]) -> DictConfig:
    """``litlab-train``'s config for ``overrides`` (with its ``hydra`` node), as the entry point makes it."""
    from hydra import compose, initialize_config_module
    from hydra.core.global_hydra import GlobalHydra

    register_hydra_extensions()
    GlobalHydra.instance().clear()
    try:
        with initialize_config_module(config_module="litlab.configs", version_base="1.3"):
            return compose("train", overrides=list(overrides), return_hydra_config=True)
    finally:
        GlobalHydra.instance().clear()


def has_wandb_logger(cfg: DictConfig) -> bool:
    """Whether ``cfg.logger`` (as composed, before instantiation) holds a wandb logger."""
    loggers = cfg.get("logger") or {}
    return any(str(node.get("_target_", "")).endswith("WandbLogger") for node in loggers.values())


def parameter_values(parameter: dict[str, Any]) -> list[Any]:
    """The values of a wandb parameter that composition must accept: each listed one, or both bounds."""
    if "values" in parameter:
        return list(parameter["values"])
    if "value" in parameter:
        return [parameter["value"]]
    return [parameter["min"], parameter["max"]]


def check_sweep_spec(path: str | Path, searchpath: Sequence[str] = ()) -> int:
    """Raise ConfigError on the first problem of the spec at ``path``; return how many configs were composed
    (the base, then points that together set every parameter to every value: see ``sweep_points``).

    ``searchpath`` adds ``hydra.searchpath`` entries (``file://...``, ``pkg://...``) as on the command line.
    """
    from hydra.types import RunMode

    spec = yaml.safe_load(Path(path).read_text())
    extra = [f"hydra.searchpath=[{','.join(searchpath)}]"] if searchpath else []
    if spec.get("method") not in METHODS:
        raise ConfigError(f"{path}: method must be one of {METHODS}, got {spec.get('method')!r}")
    command = spec.get("command") or []
    if not command or command[0] != "litlab-train" or command[-1] != "${args_no_hyphens}":
        raise ConfigError(
            f"{path}: command must be [litlab-train, <fixed overrides>..., ${{args_no_hyphens}}]"
        )
    fixed = [*extra, *command[1:-1]]
    base = compose_train(fixed)
    logged = {base.get("optimized_metric"), OmegaConf.select(base, "callbacks.model_checkpoint.monitor")}
    if spec.get("metric", {}).get("name") not in logged:
        raise ConfigError(
            f"{path}: metric.name must be the experiment's optimized_metric or monitor ({logged})"
        )
    if base.hydra.mode == RunMode.MULTIRUN:
        raise ConfigError(f"{path}: each wandb run is one run; add hydra.mode=RUN to the command")
    if not has_wandb_logger(base):
        raise ConfigError(f"{path}: add logger=wandb to the command, or the sweep never sees its metric")
    values: dict[str, list[Any]] = {}
    for name, parameter in spec.get("parameters", {}).items():
        if not set(parameter) <= PARAMETER_KEYS:
            raise ConfigError(
                f"{path}: parameter {name} has keys {sorted(parameter)}; allowed {PARAMETER_KEYS}"
            )
        values[name] = parameter_values(parameter)
        for value in values[name]:
            if not isinstance(value, SCALAR):
                raise ConfigError(f"{path}: {name} takes {value!r}; only scalars and config-group options")
    points = sweep_points(values)
    for point in points:
        cfg = compose_train([*fixed, *(f"{name}={value}" for name, value in point.items())])
        for name, value in point.items():
            reached = cfg.hydra.runtime.choices.get(name) if "/" in name else OmegaConf.select(cfg, name)
            if reached != value:
                raise ConfigError(f"{path}: {name}={value} did not reach the config (got {reached!r})")
    return 1 + len(points)


def sweep_points(values: dict[str, list[Any]]) -> list[dict[str, Any]]:
    """Points of a sweep that together take every value of every parameter: point i sets each parameter
    to its i-th value (cycling the shorter lists), as many points as the longest list has values."""
    rounds = max(map(len, values.values()), default=0)
    return [{name: options[i % len(options)] for name, options in values.items()} for i in range(rounds)]
