"""Quality scores and embeddings from a language model (the tiny-LM substrate or any local HF causal LM),
in the form the selector takes: quality in (0, 1), unit-norm embeddings centred on the pool mean.

Quality is perplexity-based (as in CCNet/DCLM-style filtering by a reference LM): a document's bits per
byte under the model, turned into σ(−z) with z its robust z-score over the pool (median, IQR), so fluent
text scores high. Embeddings are mean last-layer hidden states over each document's tokens.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from litlab.lm.documents import document_embeddings, score_documents


def unit_centred(embeddings: torch.Tensor) -> torch.Tensor:
    """``(N, d)`` rows centred on their mean and scaled to unit norm."""
    centred = embeddings.float() - embeddings.float().mean(0)
    return centred / centred.norm(dim=1, keepdim=True).clamp_min(1e-8)


def quality_from_bpb(bpb: torch.Tensor) -> torch.Tensor:
    """``(N,)`` σ(−(bpb − median)/IQR): 0.5 at the median document, higher for lower bpb."""
    low, median, high = torch.quantile(bpb.double(), torch.tensor([0.25, 0.5, 0.75], dtype=torch.float64))
    return torch.sigmoid(-(bpb.double() - median) / (high - low).clamp_min(1e-8)).float()


def lm_signals(
    model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, texts: Sequence[str], window: int = 128
) -> tuple[torch.Tensor, torch.Tensor]:
    """``quality (N,)`` and ``embeddings (N, d)`` of ``texts`` from one causal ``model``."""
    bpb = score_documents(model, tokenizer, texts, window=window)["bpb"]
    embeddings = document_embeddings(model, tokenizer, texts, window=window)
    return quality_from_bpb(bpb), unit_centred(embeddings)
