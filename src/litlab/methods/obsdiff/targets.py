"""The cached dense DiT and the evaluation classifier, trained through the run's Fitter on first use.

Both are cached with ``litlab.core.cache`` (safetensors, keyed by their full config and a version), so
tests, tasks and benchmarks reuse one trained checkpoint; a local diffusers DiT folder can replace the
trained one (``checkpoint=``).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from torch import nn

from litlab.core.cache import cached_tensors
from litlab.core.errors import ConfigError
from litlab.datamodules.procedural_images import ProceduralImagesDataModule
from litlab.fitting import Fitter
from litlab.methods.obsdiff.dit import DiTDiffusion, build_dit, load_dit
from litlab.methods.obsdiff.evaluation import ClassifierModule, ShapeClassifier
from litlab.optim import warmup_cosine

VERSION = "1"
DEFAULT_DIT: dict[str, Any] = {
    "image_size": 16,
    "n_classes": 8,
    "num_layers": 4,
    "num_heads": 4,
    "head_dim": 16,
    "patch_size": 2,
    "train_steps": 2000,
    "batch_size": 32,
    "lr": 1.0e-3,
    "n_train": 8192,
    "data_seed": 0,
    "lr_schedule": "constant",
}
LR_SCHEDULES = ("constant", "warmup_cosine")
DEFAULT_CLASSIFIER: dict[str, Any] = {"train_steps": 400, "batch_size": 64, "lr": 2.0e-3, "width": 16}


def _data(cfg: Mapping[str, Any], batch_size: int) -> ProceduralImagesDataModule:
    return ProceduralImagesDataModule(
        n_train=cfg["n_train"],
        n_val=256,
        n_test=256,
        n_classes=cfg["n_classes"],
        image_size=cfg["image_size"],
        batch_size=batch_size,
        seed=cfg["data_seed"],
    )


def _checked(cfg: Mapping[str, Any] | None, defaults: Mapping[str, Any], what: str) -> dict[str, Any]:
    merged = {**defaults, **dict(cfg or {})}
    unknown = set(merged) - set(defaults)
    if unknown:
        raise ConfigError(f"unknown {what} keys {sorted(unknown)}; valid: {sorted(defaults)}")
    return merged


def dit_cache_key(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """The DiT's cache key: its full config, less ``lr_schedule`` when constant (the recipe before that key
    existed), so the studies' cached DiTs stay valid and any other schedule trains a new model."""
    return {k: v for k, v in cfg.items() if k != "lr_schedule" or v != "constant"}


def trained_dit(
    fitter: Fitter, cfg: Mapping[str, Any] | None = None, checkpoint: str | None = None
) -> nn.Module:
    """The dense DiT in eval mode: from ``checkpoint`` (a diffusers folder), else trained and cached."""
    if checkpoint:
        if not Path(checkpoint).is_dir():
            raise ConfigError(f"checkpoint {checkpoint!r} is not a folder written by save_pretrained")
        return load_dit(checkpoint).eval()
    cfg = _checked(cfg, DEFAULT_DIT, "dit")
    if cfg["lr_schedule"] not in LR_SCHEDULES:
        raise ConfigError(f"unknown dit lr_schedule {cfg['lr_schedule']!r}; choose one of {LR_SCHEDULES}")
    arch = {k: cfg[k] for k in ("num_layers", "num_heads", "head_dim", "patch_size")}

    def build() -> dict[str, torch.Tensor]:
        data = _data(cfg, cfg["batch_size"])
        schedule = None
        if cfg["lr_schedule"] == "warmup_cosine":  # 5 % linear warm-up, cosine decay to zero
            steps = cfg["train_steps"]
            schedule = functools.partial(
                warmup_cosine, total_steps=steps, warmup_steps=steps // 20, min_lr_ratio=0.0
            )
        optimizer = functools.partial(torch.optim.AdamW, lr=cfg["lr"], weight_decay=0.0)
        module = DiTDiffusion(optimizer, scheduler=schedule, **arch)
        module.bind_data(data.data_spec())
        fitter.fit(module, data, max_steps=cfg["train_steps"], seed=cfg["data_seed"])
        return {k: v.detach().cpu() for k, v in module.net.state_dict().items()}

    state = cached_tensors("obsdiff", "dit", VERSION, dit_cache_key(cfg), build)
    model = build_dit(cfg["image_size"], 3, cfg["n_classes"], **arch)
    model.load_state_dict(state)
    return model.eval()


def trained_classifier(
    fitter: Fitter, dit_cfg: Mapping[str, Any] | None = None, cfg: Mapping[str, Any] | None = None
) -> ShapeClassifier:
    """The evaluation classifier for the DiT's image size and classes, trained on the same procedural data."""
    dit_cfg = _checked(dit_cfg, DEFAULT_DIT, "dit")
    cfg = _checked(cfg, DEFAULT_CLASSIFIER, "classifier")
    key = {**cfg, **{k: dit_cfg[k] for k in ("image_size", "n_classes", "n_train", "data_seed")}}

    def net() -> ShapeClassifier:
        return ShapeClassifier(dit_cfg["n_classes"], dit_cfg["image_size"], cfg["width"])

    def build() -> dict[str, torch.Tensor]:
        module = ClassifierModule(net(), functools.partial(torch.optim.Adam, lr=cfg["lr"]))
        fitter.fit(
            module, _data(dit_cfg, cfg["batch_size"]), max_steps=cfg["train_steps"], seed=dit_cfg["data_seed"]
        )
        return {k: v.detach().cpu() for k, v in module.net.state_dict().items()}

    classifier = net()
    classifier.load_state_dict(cached_tensors("obsdiff", "classifier", VERSION, key, build))
    return classifier.eval()
