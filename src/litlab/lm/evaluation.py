"""A small evaluation harness shared by the LM methods: NLL, perplexity and bits per byte of batches,
loaders and raw text for causal and masked-diffusion LMs; multiple-choice accuracy by continuation scores;
exact match by greedy generation.

Bits per byte divides the summed NLL (in bits) by the UTF-8 bytes of the predicted tokens, so models with
different tokenizers are compared on the same text (``evaluate_text`` scores every byte exactly once).
A masked-diffusion model is scored by its NLL bound (``diffusion_nll_terms``, a fixed number of seeded
mask draws), so its loss and bpb are upper bounds.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from litlab.datamodules.text import IGNORE_INDEX
from litlab.datamodules.tokenizers import byte_counts, token_byte_lengths
from litlab.lm.generation import generate_text, score_continuations
from litlab.lm.losses import causal_nll_terms, diffusion_nll_terms
from litlab.lm.models import is_masked_diffusion


def mask_token_id(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase | None = None) -> int | None:
    """The mask id of a masked-diffusion model (its config's, else the tokenizer's)."""
    value = getattr(model.config, "mask_token_id", None)
    return value if value is not None or tokenizer is None else tokenizer.mask_token_id


@torch.no_grad()
def evaluate_batches(
    model: PreTrainedModel,
    batches: Iterable[dict[str, torch.Tensor]],
    token_bytes: torch.Tensor,
    n_draws: int = 8,
    seed: int = 0,
    mask_id: int | None = None,
) -> dict[str, float]:
    """``loss``/``ppl``/``bpb`` over all batches (summed, not averaged per batch), by the model's kind:
    causal cross-entropy, or the masked-diffusion bound from ``n_draws`` mask draws per sequence drawn
    from a generator seeded by ``seed`` (reproducible)."""
    device = next(model.parameters()).device
    generator = torch.Generator(device).manual_seed(seed)
    diffusion = is_masked_diffusion(model.config)
    mask_id = mask_id if mask_id is not None else mask_token_id(model)
    total = None
    for batch in batches:
        batch = {key: value.to(device) for key, value in batch.items()}
        if diffusion:
            terms = diffusion_nll_terms(model, batch, token_bytes, mask_id, n_draws, generator)
        else:
            terms = causal_nll_terms(model, batch, token_bytes)
        total = terms if total is None else total + terms
    if total is None:
        raise ValueError("no batches to evaluate")
    return total.summary()


def text_windows(
    ids: Sequence[int],
    bos_id: int,
    window: int,
    stride: int | None = None,
    counts: Sequence[int] | None = None,
) -> dict[str, torch.Tensor]:
    """Windows over ``[bos] + ids`` in which every token of ``ids`` is a label exactly once:
    ``input_ids``/``labels``/``attention_mask``/``byte_counts`` ``(n_windows, window)``.

    Windows start every ``stride`` tokens (default ``window − 1``, at most that); the first labels all but
    its first token, each later one only its last ``stride`` tokens, the rest being context (up to
    ``window − stride`` tokens of it). ``counts`` are the tokens' byte counts (0 for the BOS).
    """
    stride = window - 1 if stride is None else stride
    if not 1 <= stride < window:
        raise ValueError(f"stride={stride} must lie in [1, window − 1 = {window - 1}]")
    sequence = torch.tensor([bos_id, *ids], dtype=torch.long)
    n = len(sequence)
    starts = torch.arange(1 + max(0, -(-(n - window) // stride))) * stride
    index = starts[:, None] + torch.arange(window)[None]
    inside = index < n
    clamped = index.clamp(max=n - 1)
    input_ids = torch.where(inside, sequence[clamped], bos_id)
    first_label = torch.where(starts == 0, 1, starts - stride + window)[:, None]
    labelled = inside & (index >= first_label)
    per_token = torch.tensor([0, *(counts if counts is not None else [0] * len(ids))], dtype=torch.long)
    return {
        "input_ids": input_ids,
        "labels": torch.where(labelled, input_ids, IGNORE_INDEX),
        "attention_mask": inside.long(),
        "byte_counts": torch.where(labelled, per_token[clamped], 0),
    }


def _batches(windows: dict[str, torch.Tensor], batch_size: int) -> Iterable[dict[str, torch.Tensor]]:
    return (
        {key: value[start : start + batch_size] for key, value in windows.items()}
        for start in range(0, len(windows["input_ids"]), batch_size)
    )


@torch.no_grad()
def evaluate_text(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    text: str,
    window: int = 128,
    batch_size: int = 32,
    stride: int | None = None,
    n_draws: int = 8,
    seed: int = 0,
) -> dict[str, float]:
    """NLL, perplexity and bits per byte of ``text``: every token predicted once (the first from the EOS
    token as BOS, see ``text_windows``), and ``bytes`` equal to the text's UTF-8 length whatever the
    tokenizer. A masked-diffusion model gives its bound, each window's new tokens masked given the
    visible context (``n_draws`` seeded draws)."""
    encoding = tokenizer.backend_tokenizer.encode(text, add_special_tokens=False)
    counts = byte_counts(tokenizer, [text], [encoding])[0].tolist()
    windows = text_windows(encoding.ids, tokenizer.eos_token_id, window, stride, counts)
    return evaluate_batches(
        model, _batches(windows, batch_size), token_byte_lengths(tokenizer), n_draws, seed,
        mask_token_id(model, tokenizer),
    )  # fmt: skip


def multiple_choice(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    prompts: Sequence[str],
    choices: Sequence[Sequence[str]],
    answers: Sequence[int],
    normalize: str = "none",
) -> dict[str, object]:
    """Accuracy of picking the highest-scoring choice per prompt (a causal LM); ``normalize`` = 'none'
    (sum log-prob), 'token' (per token) or 'byte' (per byte). Returns ``accuracy``, ``predictions`` and
    ``scores``."""
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
    """Greedy answers of a causal LM compared with ``answers`` after ``normalize_answer``: ``accuracy``,
    ``predictions``, ``correct``."""
    predictions = generate_text(model, tokenizer, prompts, max_new_tokens)
    correct = [normalize_answer(p) == normalize_answer(a) for p, a in zip(predictions, answers)]
    return {"accuracy": sum(correct) / max(len(correct), 1), "predictions": predictions, "correct": correct}
