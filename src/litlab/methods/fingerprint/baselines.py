"""Baselines on checkpoint folders: PCS, the trivial one (the cosine similarity of the two models' flattened
parameters, defined only when every tensor name and shape agrees), and HuRef-style invariants."""

from __future__ import annotations

import math
import os

import torch

from litlab.methods.fingerprint.align import shared_rows
from litlab.methods.fingerprint.cka import cka_biased
from litlab.methods.fingerprint.weights import open_reader, read_vocab


def pcs(first: str | os.PathLike, second: str | os.PathLike) -> float:
    """Cosine of the concatenated parameter vectors of two checkpoint folders, tensor by tensor (streamed);
    NaN when their tensor names or shapes differ (PCS cannot compare them)."""
    a, b = open_reader(first, dtype="float64"), open_reader(second, dtype="float64")
    names = sorted(a.names())
    if names != sorted(b.names()):
        return math.nan
    dot = norm_a = norm_b = torch.zeros((), dtype=torch.float64)
    for name in names:
        x, y = a.read([name])[name], b.read([name])[name]
        if x.shape != y.shape:
            return math.nan
        dot, norm_a, norm_b = dot + (x * y).sum(), norm_a + (x * x).sum(), norm_b + (y * y).sum()
    return float(dot / (norm_a.sqrt() * norm_b.sqrt()))


def _standardised(matrix: torch.Tensor) -> torch.Tensor:
    """Rows z-scored, then flattened (HuRef compares invariants after standardising each row)."""
    matrix = (matrix - matrix.mean(1, keepdim=True)) / matrix.std(1, keepdim=True).clamp_min(1e-12)
    return matrix.flatten()


def huref_invariants(
    first: str | os.PathLike, second: str | os.PathLike, max_tokens: int = 4096, layers: int = 2
) -> float:
    """HuRef-style invariant similarity (a reconstruction): for the last ``layers`` layers of each model,
    X W_qᵀW_k Xᵀ, X W_vᵀW_oᵀ Xᵀ and X W_upᵀW_downᵀ Xᵀ over the embeddings X of up to ``max_tokens`` shared
    tokens (lowest base ids first), rows standardised; the mean cosine of the pairs. Invariant to residual
    permutations (X and W move together) and to Q/K scaling; needs shared token strings, not equal widths.
    NaN without a vocabulary or with grouped keys of different head counts."""
    vocab_a, vocab_b = read_vocab(first), read_vocab(second)
    if vocab_a is None or vocab_b is None:
        return math.nan
    rows_a, rows_b = (rows[:max_tokens] for rows in shared_rows(vocab_a, vocab_b))
    readers = [open_reader(first, dtype="float64"), open_reader(second, dtype="float64")]
    embeds = [r.model_weights(keys=("embed",))["embed"][rows] for r, rows in zip(readers, (rows_a, rows_b))]
    cosines = []
    for offset in range(1, layers + 1):
        invariants = []
        for reader, x in zip(readers, embeds):
            w = reader.layer(
                reader.num_layers - offset, keys=("q", "k", "v", "o", "up", "down"), optional=("up", "down")
            )
            if w["q"].shape[0] != w["k"].shape[0]:
                return math.nan
            products = [(x @ w["q"].T) @ (w["k"] @ x.T), (x @ w["v"].T) @ (w["o"].T @ x.T)]
            if "up" in w and "down" in w:  # an MoE has no dense FFN: its pair is compared on attention only
                products.append((x @ w["up"].T) @ (w["down"].T @ x.T))
            invariants.append(products)
        for m_a, m_b in zip(*invariants):
            a, b = _standardised(m_a), _standardised(m_b)
            cosines.append(float((a @ b) / (a.norm() * b.norm())))
    return sum(cosines) / len(cosines)


def probe_texts(n: int = 64, chars: int = 96) -> list[str]:
    """REEF's fixed probe set (our choice): ``n`` snippets of ``chars`` characters spread evenly over
    tinyshakespeare, so every model sees the same inputs whatever its tokenizer."""
    from litlab.datamodules.text import text_file

    text = text_file("tinyshakespeare").read_text(encoding="utf-8")
    starts = torch.linspace(0, len(text) - chars - 1, n).long().tolist()
    return [text[s : s + chars] for s in starts]


@torch.no_grad()
def representations(folder: str | os.PathLike, texts: list[str], depth: float = 0.5) -> torch.Tensor:
    """``(n, d)`` float64: the mean over tokens of the hidden state after the layer at ``depth`` of the
    model (each text tokenized by the model's own tokenizer, no special tokens)."""
    from litlab.lm.models import load_pretrained

    model, tokenizer = load_pretrained(folder)
    model.eval()
    rows = [torch.tensor(tokenizer(t, add_special_tokens=False)["input_ids"]) for t in texts]
    width = max(map(len, rows))
    ids = torch.stack([torch.nn.functional.pad(r, (0, width - len(r))) for r in rows])
    mask = torch.arange(width)[None] < torch.tensor([len(r) for r in rows])[:, None]
    hidden = model(input_ids=ids, attention_mask=mask.long(), output_hidden_states=True).hidden_states
    layer = hidden[max(1, round(depth * (len(hidden) - 1)))].double()
    return (layer * mask[..., None]).sum(1) / mask.sum(1, keepdim=True)


def reef(first: str | os.PathLike, second: str | os.PathLike, texts: list[str] | None = None) -> float:
    """REEF-style representation similarity (a reconstruction of Zhang et al., ICLR 2025): linear CKA
    between the two models' mean-pooled middle-layer representations of the same probe texts. Unlike AWM
    it runs both models (its cost is the inference), and it needs no shared vocabulary or width."""
    texts = texts or probe_texts()
    a, b = representations(first, texts), representations(second, texts)
    return float(cka_biased(a @ a.T, b @ b.T))
