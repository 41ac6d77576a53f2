"""A small evaluation harness shared by the LM methods: NLL, perplexity and bits per byte of batches,
loaders and raw text; multiple-choice accuracy by continuation scores; exact match by greedy generation.

Bits per byte divides the summed NLL (in bits) by the UTF-8 bytes of the predicted tokens, so models with
different tokenizers are compared on the same text (``evaluate_text`` scores every byte exactly once).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import torch
from torch.nn import functional as F
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from litlab.datamodules.text import IGNORE_INDEX
from litlab.datamodules.tokenizers import token_byte_lengths
from litlab.lm.generation import generate_text, score_continuations
from litlab.lm.models import forward_process, masked_token_nll


@dataclass
class NLLTerms:
    """Summed NLL (nats) with the number of predicted tokens and their UTF-8 bytes; adds up over batches."""

    nll: torch.Tensor
    tokens: torch.Tensor
    bytes: torch.Tensor

    def __add__(self, other: NLLTerms) -> NLLTerms:
        return NLLTerms(self.nll + other.nll, self.tokens + other.tokens, self.bytes + other.bytes)

    def summary(self) -> dict[str, float]:
        """``loss`` (nats per token), ``ppl`` = exp(loss), ``bpb`` = NLL / (ln 2 · bytes), and the counts."""
        loss = float(self.nll) / max(int(self.tokens), 1)
        return {
            "loss": loss,
            "ppl": math.exp(min(loss, 50.0)),
            "bpb": float(self.nll) / math.log(2) / max(int(self.bytes), 1),
            "tokens": int(self.tokens),
            "bytes": int(self.bytes),
        }


def nll_terms(
    model: PreTrainedModel,
    batch: dict[str, torch.Tensor],
    token_bytes: torch.Tensor,
    objective: str = "causal",
    mask_token_id: int | None = None,
    eps: float = 1e-3,
    generator: torch.Generator | None = None,
) -> NLLTerms:
    """The NLL terms of one batch ``{"input_ids", "labels", ["attention_mask"]}`` (all ``(B, L)``).

    causal: next-token cross-entropy of ``labels[:, 1:]`` (HF convention, -100 ignored).
    masked_diffusion: LLaDA's estimate Σ_masked CE / p of the NLL bound over the tokens with a label
    (the forward process draws from ``generator``); tokens and bytes count every such token.
    """
    input_ids, labels = batch["input_ids"], batch.get("labels", batch["input_ids"])
    attention_mask = batch.get("attention_mask")
    token_bytes = token_bytes.to(input_ids.device)
    if objective == "causal":
        logits = model(input_ids=input_ids, attention_mask=attention_mask).logits[:, :-1]
        targets = labels[:, 1:]
        valid = targets != IGNORE_INDEX
        nll = F.cross_entropy(logits[valid].float(), targets[valid], reduction="sum")
        return NLLTerms(nll, valid.sum(), token_bytes[targets[valid]].sum())
    if mask_token_id is None:
        raise ValueError("masked-diffusion scoring needs mask_token_id")
    eligible = labels != IGNORE_INDEX
    noisy, masked, p_mask = forward_process(input_ids, mask_token_id, eps, eligible, generator)
    logits = model(input_ids=noisy, attention_mask=attention_mask).logits
    nll = masked_token_nll(logits, input_ids, masked, p_mask)
    return NLLTerms(nll, eligible.sum(), token_bytes[input_ids[eligible]].sum())


@torch.no_grad()
def evaluate_batches(
    model: PreTrainedModel,
    batches: Iterable[dict[str, torch.Tensor]],
    token_bytes: torch.Tensor,
    objective: str = "causal",
    mask_token_id: int | None = None,
    seed: int = 0,
) -> dict[str, float]:
    """``loss``/``ppl``/``bpb`` over all batches (summed, not averaged per batch). Masked-diffusion
    estimates draw their masks from a generator seeded by ``seed``, so they are reproducible."""
    device = next(model.parameters()).device
    generator = torch.Generator(device).manual_seed(seed)
    total = None
    for batch in batches:
        batch = {key: value.to(device) for key, value in batch.items()}
        terms = nll_terms(model, batch, token_bytes, objective, mask_token_id, generator=generator)
        total = terms if total is None else total + terms
    if total is None:
        raise ValueError("no batches to evaluate")
    return total.summary()


def text_windows(ids: Sequence[int], bos_id: int, window: int) -> dict[str, torch.Tensor]:
    """Windows over ``[bos] + ids`` in which every token of ``ids`` is a label exactly once, with up to
    ``window − 1`` tokens of context: ``input_ids``/``labels``/``attention_mask`` ``(n_windows, window)``."""
    sequence = torch.tensor([bos_id, *ids], dtype=torch.long)
    stride = window - 1
    starts = torch.arange(0, max(len(sequence) - 1, 1), stride)
    index = starts[:, None] + torch.arange(window)[None]
    inside = index < len(sequence)
    input_ids = torch.where(inside, sequence[index.clamp(max=len(sequence) - 1)], bos_id)
    labels = torch.where(inside, input_ids, IGNORE_INDEX)
    labels[:, 0] = (
        IGNORE_INDEX  # a window's first token is context (bos, or the previous window's last label)
    )
    return {"input_ids": input_ids, "labels": labels, "attention_mask": inside.long()}


@torch.no_grad()
def evaluate_text(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    text: str,
    window: int = 128,
    batch_size: int = 32,
) -> dict[str, float]:
    """Causal NLL, perplexity and bits per byte of ``text``: every token predicted once (the first from the
    EOS token as BOS), so ``bytes`` equals the text's UTF-8 length whatever the tokenizer."""
    ids = tokenizer.backend_tokenizer.encode(text, add_special_tokens=False).ids
    windows = text_windows(ids, tokenizer.eos_token_id, window)
    batches = (
        {key: value[start : start + batch_size] for key, value in windows.items()}
        for start in range(0, len(windows["input_ids"]), batch_size)
    )
    return evaluate_batches(model, batches, token_byte_lengths(tokenizer))


def multiple_choice(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    prompts: Sequence[str],
    choices: Sequence[Sequence[str]],
    answers: Sequence[int],
    normalize: str = "none",
) -> dict[str, object]:
    """Accuracy of picking the highest-scoring choice per prompt; ``normalize`` = 'none' (sum log-prob),
    'token' (per token) or 'byte' (per byte). Returns ``accuracy``, ``predictions`` and ``scores``."""
    flat_prompts = [p for p, options in zip(prompts, choices) for _ in options]
    flat_choices = [c for options in choices for c in options]
    scored = score_continuations(model, tokenizer, flat_prompts, flat_choices)
    denominator = {"none": None, "token": scored["n_tokens"], "byte": scored["n_bytes"]}
    if normalize not in denominator:
        raise ValueError(f"normalize={normalize!r}; choose none, token or byte")
    values = (
        scored["logprob"] if denominator[normalize] is None else scored["logprob"] / denominator[normalize]
    )
    scores, predictions, start = [], [], 0
    for options in choices:
        row = values[start : start + len(options)]
        scores.append(row.tolist())
        predictions.append(int(row.argmax()))
        start += len(options)
    correct = [p == a for p, a in zip(predictions, answers)]
    return {"accuracy": sum(correct) / len(correct), "predictions": predictions, "scores": scores}


def normalize_answer(text: str) -> str:
    """The first line, stripped of surrounding whitespace and a final period, lower-cased."""
    return text.strip().split("\n", 1)[0].strip().rstrip(".").strip().lower()


def exact_match(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    prompts: Sequence[str],
    answers: Sequence[str],
    max_new_tokens: int = 16,
) -> dict[str, object]:
    """Greedy answers compared with ``answers`` after ``normalize_answer``: ``accuracy``, ``predictions``."""
    predictions = generate_text(model, tokenizer, prompts, max_new_tokens)
    correct = [normalize_answer(p) == normalize_answer(a) for p, a in zip(predictions, answers)]
    return {"accuracy": sum(correct) / max(len(correct), 1), "predictions": predictions, "correct": correct}
