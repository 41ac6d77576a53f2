"""Per-document scores and embeddings of long documents: every document is cut into windows
(``text_windows``), the windows of all documents are batched together with the id of their document, and
the results are gathered back per document (DATAMASK-style quality and diversity signals).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from litlab.datamodules.text import IGNORE_INDEX
from litlab.datamodules.tokenizers import byte_counts
from litlab.lm.evaluation import mask_token_id, text_windows
from litlab.lm.losses import causal_token_nll, diffusion_row_nll, model_inputs
from litlab.lm.models import is_masked_diffusion


def document_windows(
    tokenizer: PreTrainedTokenizerBase, texts: Sequence[str], window: int = 128, stride: int | None = None
) -> dict[str, torch.Tensor]:
    """The ``text_windows`` of every document stacked, ``(n_windows, window)`` each, plus ``doc_ids
    (n_windows,)``: every token of every document is a label in exactly one window."""
    encodings = tokenizer.backend_tokenizer.encode_batch(list(texts), add_special_tokens=False)
    counts = byte_counts(tokenizer, texts, encodings)
    parts = [
        text_windows(e.ids, tokenizer.eos_token_id, window, stride, c.tolist())
        for e, c in zip(encodings, counts)
    ]
    windows = {key: torch.cat([p[key] for p in parts]) for key in parts[0]}
    sizes = torch.tensor([len(p["input_ids"]) for p in parts])
    windows["doc_ids"] = torch.arange(len(texts)).repeat_interleave(sizes)
    return windows


def _batches(windows: dict[str, torch.Tensor], batch_size: int, device: torch.device) -> Iterator[dict]:
    for start in range(0, len(windows["input_ids"]), batch_size):
        yield {key: value[start : start + batch_size].to(device) for key, value in windows.items()}


@torch.no_grad()
def score_documents(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    texts: Sequence[str],
    window: int = 128,
    stride: int | None = None,
    batch_size: int = 32,
    n_draws: int = 8,
    seed: int = 0,
) -> dict[str, torch.Tensor]:
    """Per document ``(N,)``: ``nll`` (nats, summed over its tokens), ``tokens``, ``bytes`` (its UTF-8
    length) and ``bpb``, each token predicted once with up to ``window − stride`` tokens of context. A
    masked-diffusion model gives its bound (``n_draws`` seeded mask draws per window)."""
    device = next(model.parameters()).device
    windows = document_windows(tokenizer, texts, window, stride)
    generator = torch.Generator(device).manual_seed(seed)
    nll = torch.zeros(len(texts), dtype=torch.float64, device=device)
    for batch in _batches(windows, batch_size, device):
        if is_masked_diffusion(model.config):
            rows = diffusion_row_nll(model, batch, mask_token_id(model, tokenizer), n_draws, generator)
        else:
            rows = causal_token_nll(model, batch).sum(1).double()
        nll.index_add_(0, batch["doc_ids"], rows)
    labelled = windows["labels"] != IGNORE_INDEX
    doc_ids = windows["doc_ids"]
    tokens = torch.zeros(len(texts), dtype=torch.long).index_add_(0, doc_ids, labelled.sum(1))
    n_bytes = torch.zeros(len(texts), dtype=torch.long).index_add_(0, doc_ids, windows["byte_counts"].sum(1))
    nll = nll.cpu()
    return {
        "nll": nll,
        "tokens": tokens,
        "bytes": n_bytes,
        "bpb": nll / torch.log(torch.tensor(2.0)) / n_bytes,
    }


@torch.no_grad()
def document_embeddings(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    texts: Sequence[str],
    window: int = 128,
    stride: int | None = None,
    batch_size: int = 32,
    layer: int = -1,
) -> torch.Tensor:
    """``(N, d)`` float: each document's mean hidden state at ``layer`` (an index into the model's
    ``hidden_states``: 0 the embeddings, −1 the last) over its tokens, each token taken once, in the
    window where it is a label (so with its context)."""
    device = next(model.parameters()).device
    windows = document_windows(tokenizer, texts, window, stride)
    sums, counts = None, torch.zeros(len(texts), device=device)
    for batch in _batches(windows, batch_size, device):
        hidden = (
            model(input_ids=batch["input_ids"], output_hidden_states=True, **model_inputs(batch))
            .hidden_states[layer]
            .float()
        )
        keep = (batch["labels"] != IGNORE_INDEX).float()
        pooled = torch.einsum("bld,bl->bd", hidden, keep)
        sums = torch.zeros(len(texts), hidden.shape[-1], device=device) if sums is None else sums
        sums.index_add_(0, batch["doc_ids"], pooled)
        counts.index_add_(0, batch["doc_ids"], keep.sum(1))
    return (sums / counts.clamp_min(1)[:, None]).cpu()
