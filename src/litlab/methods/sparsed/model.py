"""The tiny masked-diffusion LM SparseD decodes: the substrate's ``LanguageModel`` (LLaDA objective) trained
on multi-key retrieval examples through the Fitter, saved once under the litlab cache and loaded after.

The cache folder is keyed by the training recipe, so a change of recipe trains a new model; a folder
without a complete ``hf_model`` (an interrupted run) is trained again. The default recipe's model, as a cold
cache trains it (bit-identical in two cold runs on the CI machine), is shipped under ``data/sparsed``.
"""

from __future__ import annotations

import shutil
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path

import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from litlab.core.paths import cache_dir, shipped_data_dir
from litlab.datamodules.retrieval_text import RetrievalTextDataModule
from litlab.fitting import Fitter
from litlab.lm import load_pretrained
from litlab.lm.module import LanguageModel, warmup_cosine

RECIPE_VERSION = "2"


@dataclass(frozen=True)
class Recipe:
    """How the cached model is trained (the cache key): data, architecture and optimisation."""

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
    """Fit the recipe's model with ``fitter`` and save it (model + tokenizer) to ``export_dir``."""
    data = data_module(recipe)
    module = LanguageModel(
        partial(torch.optim.AdamW, lr=recipe.lr, betas=(0.9, 0.95), weight_decay=0.1),
        scheduler=partial(warmup_cosine, warmup_steps=30, min_lr_ratio=0.1),
        objective="masked_diffusion",
        arch={
            "hidden_size": recipe.hidden_size,
            "num_layers": recipe.num_layers,
            "num_heads": recipe.num_heads,
            "max_position_embeddings": max(1024, recipe.length),
        },
        total_steps=recipe.steps,
        eval_draws=2,
    )
    module.bind_data(data.data_spec())
    data.setup("fit")
    fitter = fitter or Fitter(gradient_clip_val=1.0)
    fitter.fit(module, data.train_dataloader(), max_steps=recipe.steps, seed=recipe.seed)
    module.lm.save_pretrained(export_dir)
    module.tokenizer.save_pretrained(export_dir)
    return module


def pretrained(
    recipe: Recipe | None = None, fitter: Fitter | None = None
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """The recipe's model (default ``Recipe()``) in eval mode, trained on first use (minutes on a CPU) and
    cached after; the default recipe's model ships with litlab (``data/sparsed/<cache key>``) and is copied
    into the cache instead of trained."""
    recipe = recipe or Recipe()
    folder = cache_dir("sparsed", {"version": RECIPE_VERSION, **asdict(recipe)}) / "hf_model"
    if not (folder / "model.safetensors").is_file():
        tmp = folder.with_name("hf_model.partial")
        shipped = shipped_data_dir("sparsed") / folder.parent.name / "hf_model"
        if (shipped / "model.safetensors").is_file():
            shutil.copytree(shipped, tmp, dirs_exist_ok=True)
        else:
            train(recipe, tmp, fitter)
        tmp.replace(folder)
    model, tokenizer = load_pretrained(folder)
    return model.eval(), tokenizer
