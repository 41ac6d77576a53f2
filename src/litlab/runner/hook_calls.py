"""Make Lightning's per-step hook calls skip work that cannot change anything.

Lightning calls every hook on every callback and on the LightningModule at every step (about forty calls,
each with a profiler context, ``_current_fx_name`` bookkeeping and, for ``ModelCheckpoint``, a state key
built from its arguments), most of them the base classes' empty hooks; and it re-reads the
``training_step`` signature with ``inspect`` at every step. On a small model that is a tenth of the step
(benchmarks/trainer_overhead.py). Without a profiler, calls to a hook whose body is empty are skipped,
the others run without entering the pass-through profiler's no-op context, and ``_current_fx_name`` is
set without ``nn.Module.__setattr__``'s parameter and submodule checks (it is only ever a string or None);
signatures are looked up once per function. With a profiler, Lightning's own code runs.
"""

from __future__ import annotations

import dis
import functools
from collections.abc import Callable
from typing import Any


@functools.cache
def _is_empty(function: Callable[..., Any]) -> bool:
    """Whether ``function``'s body does nothing but return None (a docstring at most)."""
    code = getattr(function, "__code__", None)
    if code is None:
        return False
    ops = [op for op in dis.get_instructions(code) if op.opname not in ("RESUME", "NOP", "CACHE")]
    names = [op.opname for op in ops]
    if names == ["RETURN_CONST"]:
        return ops[0].argval is None
    return names == ["LOAD_CONST", "RETURN_VALUE"] and ops[0].argval is None


@functools.cache
def _empty_on_class(cls: type, hook_name: str) -> bool:
    """Whether ``cls.<hook_name>`` is an empty method (asked once per class and hook)."""
    return _is_empty(getattr(cls, hook_name, None))


def _skippable(owner: Any, hook_name: str) -> bool:
    """Whether ``owner.<hook_name>`` is an empty method of its class (not one set on the object)."""
    if hook_name in getattr(owner, "__dict__", {}):
        return False
    return _empty_on_class(type(owner), hook_name)


@functools.cache
def _plain_module_setattr(cls: type) -> bool:
    """Whether ``cls`` sets attributes with ``nn.Module.__setattr__`` itself (asked once per class)."""
    import torch

    return cls.__setattr__ is torch.nn.Module.__setattr__


def _set_fx_name(module: Any, name: str | None) -> None:
    """``module._current_fx_name = name``, past ``nn.Module.__setattr__`` unless the class overrides it."""
    if _plain_module_setattr(type(module)):
        object.__setattr__(module, "_current_fx_name", name)
    else:
        module._current_fx_name = name


def streamline_hook_calls() -> None:
    """Patch Lightning's callback, LightningModule and strategy hook dispatch once per process."""
    from lightning.pytorch.profilers import PassThroughProfiler
    from lightning.pytorch.trainer import call

    if getattr(call._call_callback_hooks, "streamlined", False):
        return
    original_callbacks = call._call_callback_hooks
    original_module, original_strategy = call._call_lightning_module_hook, call._call_strategy_hook

    @functools.wraps(original_callbacks)
    def call_callback_hooks(
        trainer: Any, hook_name: str, *args: Any, monitoring_callbacks: bool | None = None, **kwargs: Any
    ) -> None:
        if monitoring_callbacks is not None or type(trainer.profiler) is not PassThroughProfiler:
            return original_callbacks(
                trainer, hook_name, *args, monitoring_callbacks=monitoring_callbacks, **kwargs
            )
        callbacks = [callback for callback in trainer.callbacks if not _skippable(callback, hook_name)]
        if not callbacks:
            return None
        pl_module = trainer.lightning_module
        if pl_module:
            previous = pl_module._current_fx_name
            _set_fx_name(pl_module, hook_name)
        for callback in callbacks:
            hook = getattr(callback, hook_name)
            if callable(hook):
                hook(trainer, pl_module, *args, **kwargs)
        if pl_module:
            _set_fx_name(pl_module, previous)
        return None

    @functools.wraps(original_module)
    def call_lightning_module_hook(
        trainer: Any, hook_name: str, *args: Any, pl_module: Any = None, **kwargs: Any
    ) -> Any:
        module = pl_module or trainer.lightning_module
        if module is None or type(trainer.profiler) is not PassThroughProfiler:
            return original_module(trainer, hook_name, *args, pl_module=pl_module, **kwargs)
        if _skippable(module, hook_name):
            return None
        hook = getattr(module, hook_name)
        if not callable(hook):
            return None
        previous = module._current_fx_name
        _set_fx_name(module, hook_name)
        output = hook(*args, **kwargs)
        _set_fx_name(module, previous)  # as Lightning: restored after a normal return only
        return output

    @functools.wraps(original_strategy)
    def call_strategy_hook(trainer: Any, hook_name: str, *args: Any, **kwargs: Any) -> Any:
        if type(trainer.profiler) is not PassThroughProfiler:
            return original_strategy(trainer, hook_name, *args, **kwargs)
        module = trainer.lightning_module
        previous = module._current_fx_name
        _set_fx_name(module, hook_name)
        hook = getattr(trainer.strategy, hook_name)
        if not callable(hook):
            return None
        output = hook(*args, **kwargs)
        _set_fx_name(module, previous)
        return output

    call_callback_hooks.streamlined = True  # type: ignore[attr-defined]
    call._call_callback_hooks = call_callback_hooks
    call._call_lightning_module_hook = call_lightning_module_hook
    call._call_strategy_hook = call_strategy_hook


def cache_hook_signatures() -> None:
    """Make ``is_param_in_hook_signature`` inspect each function once (the training loop asks every step)."""
    import importlib

    from lightning.pytorch.utilities import signature_utils

    original = signature_utils.is_param_in_hook_signature
    if getattr(original, "cached", False):
        return

    @functools.lru_cache(maxsize=4096)
    def cached(function: Any, param: str, explicit: bool, min_args: int | None) -> bool:
        return original(function, param, explicit=explicit, min_args=min_args)

    @functools.wraps(original)
    def is_param_in_hook_signature(
        hook_fx: Callable[..., Any], param: str, explicit: bool = False, min_args: int | None = None
    ) -> bool:
        # getfullargspec reads the same arguments (self included) from a bound method and its function
        function = getattr(hook_fx, "__func__", hook_fx)
        try:
            return cached(function, param, explicit, min_args)
        except TypeError:  # an unhashable callable
            return original(hook_fx, param, explicit=explicit, min_args=min_args)

    is_param_in_hook_signature.cached = True  # type: ignore[attr-defined]
    signature_utils.is_param_in_hook_signature = is_param_in_hook_signature
    for name in ("loops.training_epoch_loop", "loops.evaluation_loop", "loops.utilities", "core.module"):
        module = importlib.import_module(f"lightning.pytorch.{name}")
        if getattr(module, "is_param_in_hook_signature", None) is original:
            module.is_param_in_hook_signature = is_param_in_hook_signature
