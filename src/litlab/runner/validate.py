"""Check a composed config before any work: framework keys (no torch), then each ``_target_``'s arguments.

``check_config`` needs only OmegaConf and runs before torch or Lightning is imported, so a mistyped
value fails in about a second. ``check_arguments`` imports each ``_target_`` and compares the given
keys and values with its signature (unknown argument, wrong type, value outside a ``Literal``).
"""

from __future__ import annotations

import difflib
import inspect
import os
import types
import typing
from collections.abc import Callable, Mapping
from pathlib import Path, PurePath
from typing import Any

from omegaconf import DictConfig, OmegaConf

from litlab.core.errors import ConfigError
from litlab.runner.run_folder import check_run_id

CPU_PRECISIONS = {"32", "32-true", "64", "64-true", "bf16", "bf16-mixed", "bf16-true", "transformer-engine"}
GPU_ONLY_PRECISIONS = {"16", "16-mixed", "16-true"}
DATA_PATH_KEYS = ("root",)
# Annotated types that libraries build from a config string themselves.
BUILT_FROM_TEXT = (Path, PurePath, os.PathLike)


def _select(cfg: DictConfig, key: str) -> Any:
    return OmegaConf.select(cfg, key, throw_on_missing=False)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _require_int(key: str, value: Any, minimum: int, allow: tuple[Any, ...] = ()) -> None:
    if value is None or value in allow and not isinstance(value, bool):
        return
    if not _is_int(value) or value < minimum:
        extra = f" (or {', '.join(map(str, allow))})" if allow else ""
        raise ConfigError(f"{key}={value!r} must be a whole number >= {minimum}{extra}")


def _require_number(key: str, value: Any, minimum: float) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int | float) or value < minimum:
        raise ConfigError(f"{key}={value!r} must be a number >= {minimum}")


def check_trainer(cfg: DictConfig) -> None:
    """Types and ranges of the Trainer keys users override most."""
    trainer = _select(cfg, "trainer")
    if trainer is None:
        return
    get = trainer.get
    _require_int("trainer.max_epochs", get("max_epochs"), 1, allow=(-1,))
    _require_int("trainer.min_epochs", get("min_epochs"), 0)
    _require_int("trainer.max_steps", get("max_steps"), 1, allow=(-1,))
    _require_int("trainer.check_val_every_n_epoch", get("check_val_every_n_epoch"), 1)
    _require_int("trainer.log_every_n_steps", get("log_every_n_steps"), 1)
    _require_int("trainer.accumulate_grad_batches", get("accumulate_grad_batches"), 1)
    _require_int("trainer.num_nodes", get("num_nodes"), 1)
    _require_number("trainer.gradient_clip_val", get("gradient_clip_val"), 0.0)
    for key in ("limit_train_batches", "limit_val_batches", "limit_test_batches", "val_check_interval"):
        value = get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | float) or value < 0):
            raise ConfigError(f"trainer.{key}={value!r} must be a batch count (int) or a fraction in [0, 1]")
        if isinstance(value, float) and value > 1 and key != "val_check_interval":
            raise ConfigError(f"trainer.{key}={value!r}: a fraction is in [0, 1]; give an int for a count")
    max_epochs, max_steps = get("max_epochs"), get("max_steps")
    if max_epochs == -1 and max_steps in (None, -1):
        raise ConfigError("trainer.max_epochs=-1 runs forever without trainer.max_steps; set one of them")
    devices = get("devices")
    if not (devices in ("auto", -1) or (_is_int(devices) and devices >= 1) or OmegaConf.is_list(devices)):
        raise ConfigError(f"trainer.devices={devices!r} must be a count >= 1, a list of ids, -1 or 'auto'")
    precision = str(get("precision", "32-true"))
    accelerator = str(get("accelerator", "cpu"))
    if precision not in CPU_PRECISIONS | GPU_ONLY_PRECISIONS:
        raise ConfigError(
            f"trainer.precision={precision!r} is unknown; use 32-true, bf16-mixed, 16-mixed (GPU) or 64-true"
        )
    if accelerator == "cpu" and precision in GPU_ONLY_PRECISIONS:
        raise ConfigError(f"trainer.precision={precision} needs a GPU; on a CPU use bf16-mixed or 32-true")


def check_resources(cfg: DictConfig) -> None:
    resources = _select(cfg, "resources")
    if resources is None:
        return
    _require_int("resources.nodes", resources.get("nodes"), 1)
    devices = resources.get("devices")
    if devices not in ("auto", -1):
        _require_int("resources.devices", devices, 1)
    _require_int("resources.cpus_per_task", resources.get("cpus_per_task"), 1)
    _require_number("resources.timeout_min", resources.get("timeout_min"), 1)


def check_paths_exist(cfg: DictConfig) -> None:
    """Explicit input paths (``data.root``, ``resume=<file>``, ``ckpt_path``, ``test_ckpt=<file>``) exist."""
    data = _select(cfg, "data")
    if isinstance(data, DictConfig):
        for key in DATA_PATH_KEYS:
            value = data.get(key)
            if value is not None and not Path(str(value)).expanduser().exists():
                raise ConfigError(f"data.{key}={value} does not exist; give an existing folder or unset it")
    resume = _select(cfg, "resume")
    if resume not in (None, False, "none", "auto") and not Path(str(resume)).is_file():
        raise ConfigError(f"resume={resume} is neither 'auto' nor an existing checkpoint file")
    test_ckpt = _select(cfg, "test_ckpt")
    if test_ckpt not in (None, "best", "last") and not Path(str(test_ckpt)).is_file():
        raise ConfigError(f"test_ckpt={test_ckpt} must be best, last, null or an existing checkpoint file")
    if "ckpt_path" in list(cfg):  # (`in cfg` is False for a missing "???" value)
        ckpt = _select(cfg, "ckpt_path")
        if ckpt is None:
            raise ConfigError("ckpt_path is required: ckpt_path=<a .ckpt file from a run's checkpoints/>")
        if not Path(str(ckpt)).is_file():
            raise ConfigError(
                f"ckpt_path={ckpt} does not exist; give a .ckpt file from a run's checkpoints/ folder"
            )


def check_optimized_metric(cfg: DictConfig) -> None:
    name = _select(cfg, "optimized_metric")
    if name is not None and (not isinstance(name, str) or not name.strip()):
        raise ConfigError(f"optimized_metric={name!r} must be a metric name such as val/loss, or null")


def check_config(cfg: DictConfig) -> None:
    """The fast checks (no torch): run id, seed, resources, Trainer keys, input paths, metric name."""
    check_run_id(_select(cfg, "run_id"))
    seed = _select(cfg, "seed")
    if seed is not None and not _is_int(seed):
        raise ConfigError(f"seed={seed!r} must be a whole number or null")
    check_resources(cfg)
    check_trainer(cfg)
    check_paths_exist(cfg)
    check_optimized_metric(cfg)


# --- arguments of every _target_ -----------------------------------------------------------------


def check_arguments(node: Any, where: str) -> None:
    """Compare each ``_target_`` node under ``node`` (a plain container) with its callable's signature."""
    if isinstance(node, Mapping):
        target = node.get("_target_")
        if isinstance(target, str):
            _check_call(target, node, where)
        for key, value in node.items():
            if not str(key).startswith("_"):
                check_arguments(value, f"{where}.{key}")
    elif isinstance(node, list | tuple):
        for index, value in enumerate(node):
            check_arguments(value, f"{where}[{index}]")


def _check_call(target: str, node: Mapping[str, Any], where: str) -> None:
    from hydra.utils import get_object

    try:
        fn = get_object(target)
    except Exception as error:
        raise ConfigError(f"{where}._target_={target} cannot be imported ({error})") from error
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return
    params = signature.parameters
    takes_kwargs = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    hints = _hints(fn)
    for key, value in node.items():
        if str(key).startswith("_"):
            continue
        if key not in params:
            if takes_kwargs:
                continue
            names = [p for p in params if p != "self"]
            close = difflib.get_close_matches(str(key), names, n=3)
            hint = f"did you mean {', '.join(close)}?" if close else f"its arguments are: {', '.join(names)}"
            raise ConfigError(f"{where}.{key} is not an argument of {target}; {hint}")
        hint = hints.get(key)
        if hint is not None and not _matches(value, hint):
            raise ConfigError(
                f"{where}.{key}={value!r} does not fit {target}'s {key}: expected {_describe(hint)}"
            )


def _hints(fn: Callable[..., Any]) -> dict[str, Any]:
    target = fn.__init__ if inspect.isclass(fn) else fn
    try:
        return typing.get_type_hints(target)
    except Exception:
        return {}


def _matches(value: Any, hint: Any) -> bool:
    """Whether a config value fits a simple annotation (unknown annotations always fit)."""
    if hint is Any or value is None and _optional(hint):
        return True
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return any(_matches(value, arg) for arg in typing.get_args(hint))
    if origin is typing.Literal:
        return value in typing.get_args(hint)
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return _is_int(value)
    if hint is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if hint is str:
        return isinstance(value, str)
    if value is None:
        return False
    if inspect.isclass(hint) and isinstance(value, bool | int | float | str) and hint not in BUILT_FROM_TEXT:
        return isinstance(value, hint)  # a plain number or text cannot be, e.g., a Tensor or a Module
    return True


def _optional(hint: Any) -> bool:
    return hint is type(None) or (
        typing.get_origin(hint) in (typing.Union, types.UnionType) and type(None) in typing.get_args(hint)
    )


def _describe(hint: Any) -> str:
    origin = typing.get_origin(hint)
    if origin is typing.Literal:
        return "one of " + ", ".join(map(repr, typing.get_args(hint)))
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_describe(arg) for arg in typing.get_args(hint))
    return getattr(hint, "__name__", str(hint))
