"""The substrate LM of a seed: trained once through the Fitter on tagged proofs, its weights cached.

The LM sees correct chains and chains with corrupted steps, each step followed by its gold tag, and the
correct answer, all drawn from problems (training ontologies, depths 2-4) other than the ones it is later
asked to label: the tags mean something, and no evaluation chain's tags are ever seen.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import torch
from torch import nn

from litlab.core.cache import cached_tensors
from litlab.datamodules.prontoqa import GENERATOR_VERSION, ProntoQADataModule
from litlab.fitting import Fitter
from litlab.lm.models import build_lm
from litlab.lm.module import warmup_cosine
from litlab.methods.veracity.module import VeracityLM, substrate_config

SUBSTRATE_VERSION = "1"
DEFAULT_ARCH = {"hidden_size": 64, "num_layers": 2, "num_heads": 4}


def train_substrate(
    fitter: Fitter, seed: int, steps: int, train_size: int, batch_size: int, lr: float, arch: dict[str, Any]
) -> VeracityLM:
    """Fit a fresh :class:`VeracityLM` of ``seed`` for ``steps`` AdamW steps (warm-up/cosine)."""
    data = ProntoQADataModule(train_size=train_size, eval_size=64, batch_size=batch_size, seed=seed)
    module = VeracityLM(
        optimizer=partial(torch.optim.AdamW, lr=lr, betas=(0.9, 0.95), weight_decay=0.1),
        scheduler=partial(warmup_cosine, warmup_steps=max(1, steps // 20)),
        arch=arch,
        total_steps=steps,
    )
    torch.manual_seed(seed)
    module.bind_data(data.data_spec())
    fitter.fit(module, data.train_dataloader(), max_steps=steps, seed=seed)
    return module


def substrate_lm(
    fitter: Fitter,
    seed: int,
    steps: int = 1500,
    train_size: int = 12000,
    batch_size: int = 32,
    lr: float = 3e-3,
    arch: dict[str, Any] | None = None,
) -> nn.Module:
    """The trained LM of ``seed`` in eval mode, from the cache when these settings were trained before."""
    arch = dict(arch or DEFAULT_ARCH)
    key = {"seed": seed, "steps": steps, "train_size": train_size, "batch_size": batch_size, "lr": lr}
    key |= {"arch": arch, "data": GENERATOR_VERSION}

    def build() -> dict[str, torch.Tensor]:
        module = train_substrate(fitter, seed, steps, train_size, batch_size, lr, arch)
        return {name: value.detach().cpu().clone() for name, value in module.lm.state_dict().items()}

    state = cached_tensors("veracity", "substrate_lm", SUBSTRATE_VERSION, key, build)
    model = build_lm(substrate_config(arch))
    model.load_state_dict(state)
    return model.eval()
