"""Downstream check: a tiny causal LLaMA (``litlab.lm``) pretrained on a selected subset for a fixed token
budget (so a smaller subset is seen for more epochs), scored in bits per byte on held-out clean documents
of every domain."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from functools import partial

import torch
from transformers import PreTrainedTokenizerBase

from litlab.datamodules.base import batch_loader
from litlab.datamodules.text import BlockDataset, encode_texts
from litlab.fitting import Fitter
from litlab.lm.module import LanguageModel, warmup_cosine


def block_dataset(tokenizer: PreTrainedTokenizerBase, texts: Sequence[str], block_size: int) -> BlockDataset:
    """``texts`` encoded with an EOS after each, packed into ``(n, block_size)`` blocks with byte counts."""
    return BlockDataset(encode_texts(tokenizer, list(texts), tokenizer.eos_token_id).pack(block_size))


@torch.no_grad()
def heldout_bpb(module: LanguageModel, loader: Iterable[dict[str, torch.Tensor]]) -> float:
    """Bits per byte of ``module`` over every token of ``loader`` (NLL and bytes summed, then divided)."""
    module.eval()
    nll, n_bytes = 0.0, 0.0
    for batch in loader:
        terms = module.nll({key: value.to(module.device) for key, value in batch.items()})
        nll, n_bytes = nll + float(terms.nll), n_bytes + float(terms.bytes)
    return nll / math.log(2) / max(n_bytes, 1.0)


def pretrain_and_score(
    fitter: Fitter,
    tokenizer: PreTrainedTokenizerBase,
    train_texts: Sequence[str],
    heldout: Mapping[str, Sequence[str]],
    *,
    steps: int,
    eval_every: int,
    block_size: int,
    batch_size: int,
    arch: Mapping[str, int],
    lr: float,
    seed: int,
) -> dict:
    """Train on ``train_texts`` for ``steps`` AdamW steps; return ``curve`` (step, held-out bpb of all
    domains together), per-domain ``bpb`` at the end and their mean (``mean_bpb``), and ``epochs`` seen."""
    train = block_dataset(tokenizer, train_texts, block_size)
    pooled = block_dataset(tokenizer, [t for texts in heldout.values() for t in texts], block_size)
    module = LanguageModel(
        optimizer=partial(torch.optim.AdamW, lr=lr, betas=(0.9, 0.95), weight_decay=0.1),
        scheduler=partial(warmup_cosine, warmup_steps=max(1, steps // 10), min_lr_ratio=0.1),
        total_steps=steps,
        arch={**arch, "max_position_embeddings": block_size},
    )
    module.bind_data({"tokenizer": tokenizer, "block_size": block_size})
    result = fitter.fit(
        module,
        batch_loader(train, batch_size, True, seed, 0),
        batch_loader(pooled, 64, False, seed, 0),
        max_steps=steps,
        val_every_n_steps=eval_every,
        seed=seed,
    )
    curve = [(row["step"], row["val/bpb"]) for row in result.history if "val/bpb" in row]
    bpb = {
        domain: heldout_bpb(
            module, batch_loader(block_dataset(tokenizer, texts, block_size), 64, False, seed, 0)
        )
        for domain, texts in heldout.items()
    }
    return {
        "curve": curve,
        "bpb": bpb,
        "mean_bpb": sum(bpb.values()) / len(bpb),
        "epochs": steps * batch_size / max(1, len(train)),
    }
