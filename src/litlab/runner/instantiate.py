"""Build callbacks, loggers and plugins from the named-dict config groups."""

from __future__ import annotations

import logging

import hydra
from lightning.pytorch import Callback
from lightning.pytorch.loggers import Logger
from omegaconf import DictConfig

log = logging.getLogger(__name__)


def _named_entries(group: DictConfig | None, kind: str) -> list:
    """Instantiate each ``name: {_target_: ...}`` entry; ``name: null`` drops it."""
    objects = []
    for name, entry in (group or {}).items():
        if entry is None:
            continue
        if not isinstance(entry, DictConfig) or "_target_" not in entry:
            raise ValueError(f"{kind}.{name} must be a config with a _target_ (or null to drop it)")
        objects.append(hydra.utils.instantiate(entry))
    return objects


def instantiate_callbacks(cfg: DictConfig | None) -> list[Callback]:
    """Callbacks from ``cfg.callbacks``."""
    return _named_entries(cfg, "callbacks")


def instantiate_loggers(cfg: DictConfig | None) -> list[Logger]:
    """Loggers from ``cfg.logger``."""
    return _named_entries(cfg, "logger")
