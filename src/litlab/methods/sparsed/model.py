"""The tiny masked-diffusion LM SparseD decodes: the substrate's ``LanguageModel`` (LLaDA objective) trained
on multi-key retrieval examples through the Fitter, saved once under the litlab cache and loaded after.

The cache folder is keyed by the training recipe, so a change of recipe trains a new model; a folder
without a complete ``hf_model`` (an interrupted run) is trained again. A recipe with an ``init`` fine-tunes
that recipe's model (trained or taken from the cache first): a chain of such recipes lengthens a model that
learnt retrieval at a short length (``configs/recipe/sparsed/retrieval_512.yaml``). The default recipe's
model, as a cold cache trains it (bit-identical in two cold runs on the CI machine), and the retrieval_512
model are shipped under ``data/sparsed``.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, fields
from functools import partial
from pathlib import Path
from typing import Any

import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from litlab.core.errors import ConfigError
from litlab.core.paths import cache_dir, shipped_data_dir
from litlab.datamodules.retrieval_text import RetrievalTextDataModule
from litlab.fitting import Fitter
from litlab.lm import load_pretrained
from litlab.lm.module import LanguageModel, warmup_cosine

RECIPE_VERSION = "2"


@dataclass(frozen=True)
class Recipe:
    """How the cached model is trained (the cache key): data, architecture and optimisation, and the
    recipe whose model it fine-tunes (``init``; None trains from scratch)."""

    length: int = 256
    n_keys: int = 6
    value_length: int = 8
    n_train: int = 8000
    prompt_labels: bool = True
    hidden_size: int = 64
    num_layers: int = 4
    num_heads: int = 4
    steps: int = 500
    batch_size: int = 16
    lr: float = 3e-3
    seed: int = 0
    init: Recipe | None = None

    def __post_init__(self) -> None:
        if self.init is not None:
            arch = ("hidden_size", "num_layers", "num_heads")
            changed = [f"{a}={getattr(self, a)}" for a in arch if getattr(self, a) != getattr(self.init, a)]
            if changed:
                raise ConfigError(
                    f"recipe {', '.join(changed)} differs from its init's; a fine-tune keeps the architecture"
                )


def cache_key(recipe: Recipe) -> dict[str, Any]:
    """The recipe as its cache key; ``init`` appears only when set, so recipes trained from scratch keep the
    keys (and the shipped model) they had before fine-tuning existed."""
    key: dict[str, Any] = {"version": RECIPE_VERSION}
    key.update({f.name: getattr(recipe, f.name) for f in fields(recipe) if f.name != "init"})
    if recipe.init is not None:
        key["init"] = cache_key(recipe.init)
    return key


def data_module(recipe: Recipe, cache: str | None = None) -> RetrievalTextDataModule:
    """The retrieval data the recipe trains on (its test split is what the claim decodes)."""
    return RetrievalTextDataModule(
        length=recipe.length,
        n_keys=recipe.n_keys,
        value_length=recipe.value_length,
        n_train=recipe.n_train,
        batch_size=recipe.batch_size,
        eval_batch_size=64,
        prompt_labels=recipe.prompt_labels,
        cache_dir=cache,
    )


def train(recipe: Recipe, export_dir: Path, fitter: Fitter | None = None) -> LanguageModel:
    """Fit the recipe's model with ``fitter`` (from its ``init`` model when set) and save it (model +
    tokenizer) to ``export_dir``. The fit keeps its state in ``training.ckpt`` beside ``export_dir`` (at
    every epoch end and every 10 minutes), so a killed training continues where it was saved."""
    data = data_module(recipe)
    start = str(model_folder(recipe.init, fitter)) if recipe.init is not None else None
    module = LanguageModel(
        partial(torch.optim.AdamW, lr=recipe.lr, betas=(0.9, 0.95), weight_decay=0.1),
        scheduler=partial(warmup_cosine, warmup_steps=30, min_lr_ratio=0.1),
        objective="masked_diffusion",
        pretrained_path=start,
        arch={
            "hidden_size": recipe.hidden_size,
            "num_layers": recipe.num_layers,
            "num_heads": recipe.num_heads,
            "max_position_embeddings": max(1024, recipe.length),
        },
        total_steps=recipe.steps,
        eval_draws=2,
    )
    torch.manual_seed(recipe.seed)  # the initial weights are the recipe's, whatever ran before in the process
    module.bind_data(data.data_spec())
    data.setup("fit")
    fitter = fitter or Fitter(gradient_clip_val=1.0)
    checkpoint = export_dir.with_name("training.ckpt")
    fitter.fit(
        module,
        data.train_dataloader(),
        max_steps=recipe.steps,
        seed=recipe.seed,
        progress=f"training the SparseD model at L = {recipe.length} ({recipe.steps} steps)",
        checkpoint=checkpoint,
    )
    module.lm.save_pretrained(export_dir)
    module.tokenizer.save_pretrained(export_dir)
    checkpoint.unlink(missing_ok=True)
    return module


def model_folder(recipe: Recipe, fitter: Fitter | None = None) -> Path:
    """The cache folder holding the recipe's model, trained on first use (minutes on a CPU) or copied from
    the models that ship with litlab (``data/sparsed/<cache key>``)."""
    folder = cache_dir("sparsed", cache_key(recipe)) / "hf_model"
    if not (folder / "model.safetensors").is_file():
        tmp = folder.with_name("hf_model.partial")
        shipped = shipped_data_dir("sparsed") / folder.parent.name / "hf_model"
        if (shipped / "model.safetensors").is_file():
            shutil.copytree(shipped, tmp, dirs_exist_ok=True)
        else:
            train(recipe, tmp, fitter)
        tmp.replace(folder)
    return folder


def pretrained(
    recipe: Recipe | None = None, fitter: Fitter | None = None
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """The recipe's model (default ``Recipe()``) in eval mode: see :func:`model_folder`."""
    model, tokenizer = load_pretrained(model_folder(recipe or Recipe(), fitter))
    return model.eval(), tokenizer
