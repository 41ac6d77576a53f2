"""Sampling and scoring for causal LMs: several samples per prompt with the log-probs of the sampled tokens,
stop strings and an end-of-text mask (what GRPO-style training needs), greedy decoding, token
log-probabilities with gradients, and scores of given continuations.

Everything leaves the global RNG untouched: sampling draws from a ``torch.Generator`` seeded by ``seed``,
so the same call returns the same tokens. Masked-diffusion models are refused (see ``diffusion``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase
from transformers.generation.stopping_criteria import StopStringCriteria

from litlab.core.errors import LitlabError
from litlab.lm.decoding import DecodeState
from litlab.lm.losses import model_inputs
from litlab.lm.models import require_causal


def pad_sequences(
    sequences: Sequence[Sequence[int]], pad_id: int, side: str = "right"
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(ids (N, L), attention_mask (N, L))`` with every sequence padded to the longest on ``side``."""
    length = max(len(s) for s in sequences)
    ids = torch.full((len(sequences), length), pad_id, dtype=torch.long)
    mask = torch.zeros((len(sequences), length), dtype=torch.long)
    for row, sequence in enumerate(sequences):
        span = slice(length - len(sequence), length) if side == "left" else slice(0, len(sequence))
        ids[row, span] = torch.as_tensor(list(sequence), dtype=torch.long)
        mask[row, span] = 1
    return ids, mask


def pad_id(tokenizer: PreTrainedTokenizerBase) -> int:
    """The tokenizer's pad id, else its EOS id."""
    return tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id


def encode_prompts(
    tokenizer: PreTrainedTokenizerBase, prompts: Sequence[str], device: torch.device | str = "cpu"
) -> tuple[torch.Tensor, torch.Tensor]:
    """Left-padded ``(ids, attention_mask)`` of the prompt strings (no special tokens added)."""
    encoded = [
        e.ids for e in tokenizer.backend_tokenizer.encode_batch(list(prompts), add_special_tokens=False)
    ]
    if any(not ids for ids in encoded):
        raise LitlabError(
            "every prompt needs at least one token (prepend the EOS token to start from scratch)"
        )
    ids, mask = pad_sequences(encoded, pad_id(tokenizer), side="left")
    return ids.to(device), mask.to(device)


@dataclass
class Generation:
    """Samples from a causal LM; rows are grouped by prompt (prompt i → rows ``i·n .. i·n + n − 1``).

    Attributes:
        sequences: ``(N, P + T)`` left-padded prompt, then the completion (``pad_id`` after its end).
        attention_mask: ``(N, P + T)`` 1 on prompt and completion tokens, 0 on padding.
        completion_ids: ``(N, T)`` the generated tokens (``pad_id`` after the end).
        completion_mask: ``(N, T)`` bool, True up to and including the token that ended the text (EOS or
            the one completing a stop string): the tokens a policy-gradient loss sums over.
        logprobs: ``(N, T)`` log-prob of each generated token under softmax(logits / temperature), the
            distribution before top-k/top-p filtering (T = 1 for greedy decoding); 0 after the end.
        finished: ``(N,)`` True if the text ended (EOS or a stop string), False if it hit the length limit.
        prompt_index: ``(N,)`` the prompt each row continues.
        stop_strings: the stop strings, which ``decode`` cuts off.
    """

    sequences: torch.Tensor
    attention_mask: torch.Tensor
    completion_ids: torch.Tensor
    completion_mask: torch.Tensor
    logprobs: torch.Tensor
    finished: torch.Tensor
    prompt_index: torch.Tensor
    stop_strings: tuple[str, ...] = ()

    def decode(self, tokenizer: PreTrainedTokenizerBase) -> list[str]:
        """The completions as text: special tokens dropped, cut before the first stop string."""
        texts = []
        for ids, mask in zip(self.completion_ids.tolist(), self.completion_mask.tolist()):
            text = tokenizer.decode([t for t, keep in zip(ids, mask) if keep], skip_special_tokens=True)
            cuts = [text.find(s) for s in self.stop_strings if s in text]
            texts.append(text[: min(cuts)] if cuts else text)
        return texts


def _filter(logits: torch.Tensor, top_k: int | None, top_p: float | None) -> torch.Tensor:
    """Logits outside the top ``top_k`` or the smallest set of probability ≥ ``top_p`` set to −inf."""
    if top_k:
        kth = logits.topk(min(top_k, logits.shape[-1]), dim=-1).values[:, -1:]
        logits = logits.masked_fill(logits < kth, -torch.inf)
    if top_p is not None and top_p < 1.0:
        sorted_logits, order = logits.sort(dim=-1, descending=True)
        probs = sorted_logits.softmax(-1)
        drop = (probs.cumsum(-1) - probs) >= top_p  # the mass before this token already reaches top_p
        logits = logits.masked_fill(drop.scatter(-1, order, drop), -torch.inf)
    return logits


@dataclass
class Decoded:
    """What ``decode`` produced: ``tokens``, ``mask``, ``logprobs`` ``(N, T)``, ``finished (N,)`` (as in
    ``Generation``) and ``state``, the decoding state before the last token (the last is not run)."""

    tokens: torch.Tensor
    mask: torch.Tensor
    logprobs: torch.Tensor
    finished: torch.Tensor
    state: DecodeState


@torch.no_grad()
def decode(
    state: DecodeState,
    max_new_tokens: int,
    *,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    eos_token_id: int | Sequence[int] | None = None,
    stop_strings: Sequence[str] = (),
    tokenizer: PreTrainedTokenizerBase | None = None,
    pad_token_id: int = 0,
    seed: int = 0,
) -> Decoded:
    """Continue every row of ``state`` for up to ``max_new_tokens`` tokens (see ``sample`` for the
    options); one forward per step over the cache, never run for the last token."""
    if temperature < 0:
        raise LitlabError(f"temperature must be ≥ 0, got {temperature}")
    if stop_strings and tokenizer is None:
        raise LitlabError("stop_strings need the tokenizer (tokenizer=...)")
    device = state.logits.device
    eos = torch.tensor([] if eos_token_id is None else [eos_token_id], device=device).flatten().long()
    criteria = StopStringCriteria(tokenizer, list(stop_strings)) if stop_strings else None
    generator = torch.Generator(device).manual_seed(seed)
    scale = temperature if temperature > 0 else 1.0
    finished = torch.zeros(state.rows, dtype=torch.bool, device=device)
    tokens, logprobs, masks = [], [], []
    for step in range(max_new_tokens):
        logits = state.logits
        if temperature == 0:
            token = logits.argmax(-1)
        else:
            probs = _filter(logits / temperature, top_k, top_p).softmax(-1)
            token = torch.multinomial(probs, 1, generator=generator)[:, 0]
        logprob = torch.log_softmax(logits / scale, -1).gather(-1, token[:, None])[:, 0]
        live = ~finished
        tokens.append(torch.where(live, token, pad_token_id))
        logprobs.append(logprob * live)
        masks.append(live)
        finished = finished | (live & torch.isin(token, eos))
        if criteria is not None:
            finished |= live & criteria(torch.stack(tokens, 1), None).to(device)
        if finished.all() or step + 1 == max_new_tokens:
            break
        state = state.append(tokens[-1], live[:, None])
    if not tokens:
        empty = torch.zeros(state.rows, 0, dtype=torch.long, device=device)
        return Decoded(empty, empty.bool(), empty.float(), finished, state)
    return Decoded(torch.stack(tokens, 1), torch.stack(masks, 1), torch.stack(logprobs, 1), finished, state)


def sample(
    model: PreTrainedModel,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor | None = None,
    max_new_tokens: int = 32,
    *,
    num_samples: int = 1,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    eos_token_id: int | Sequence[int] | None = None,
    stop_strings: Sequence[str] = (),
    tokenizer: PreTrainedTokenizerBase | None = None,
    pad_token_id: int | None = None,
    seed: int = 0,
    **model_kwargs: object,
) -> Generation:
    """``num_samples`` continuations of each prompt in ``input_ids: (B, P)`` (left-padded where
    ``attention_mask`` is 0), decoded step by step with a KV cache (``DecodeState``).

    ``temperature = 0`` is greedy; otherwise tokens are drawn from softmax(logits / temperature) after the
    optional ``top_k``/``top_p`` filters, from a generator seeded by ``seed``. A row ends at any
    ``eos_token_id`` (None: no EOS) or when its completion contains a stop string (needs ``tokenizer``;
    matched in the completion only). The prompt is run once and its cache shared by its samples.
    ``model_kwargs`` (e.g. ``block_mask``) reach every step.
    """
    require_causal(model, "sample")
    prompt_mask = torch.ones_like(input_ids) if attention_mask is None else attention_mask.long()
    rows = torch.arange(len(input_ids), device=input_ids.device).repeat_interleave(num_samples)
    state = DecodeState.prefill(model, input_ids, prompt_mask, **model_kwargs).select(rows)
    pad = pad_token_id if pad_token_id is not None else (model.config.pad_token_id or 0)
    out = decode(
        state, max_new_tokens, temperature=temperature, top_k=top_k, top_p=top_p, eos_token_id=eos_token_id,
        stop_strings=stop_strings, tokenizer=tokenizer, pad_token_id=pad, seed=seed,
    )  # fmt: skip
    return Generation(
        sequences=torch.cat([input_ids[rows], out.tokens], 1),
        attention_mask=torch.cat([prompt_mask[rows], out.mask.long()], 1),
        completion_ids=out.tokens,
        completion_mask=out.mask,
        logprobs=out.logprobs,
        finished=out.finished,
        prompt_index=rows,
        stop_strings=tuple(stop_strings),
    )


def generate(
    model: PreTrainedModel,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor | None = None,
    max_new_tokens: int = 32,
    do_sample: bool = False,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    eos_token_id: int | Sequence[int] | None = None,
    pad_token_id: int | None = None,
    seed: int = 0,
) -> torch.Tensor:
    """``(B, P + T)``: greedy (or, with ``do_sample``, seeded sampled) continuations of the prompts; rows
    that end early are padded with ``pad_token_id``. See ``sample`` for log-probs and several samples."""
    return sample(
        model, input_ids, attention_mask, max_new_tokens, temperature=temperature if do_sample else 0.0,
        top_k=top_k, top_p=top_p, eos_token_id=eos_token_id, pad_token_id=pad_token_id, seed=seed,
    ).sequences  # fmt: skip


def sample_text(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    prompts: Sequence[str],
    max_new_tokens: int = 32,
    **options: object,
) -> tuple[list[str], Generation]:
    """``sample`` on prompt strings (ending at the tokenizer's EOS unless ``eos_token_id`` is given):
    the decoded completions (stop strings cut off) and the ``Generation``."""
    ids, mask = encode_prompts(tokenizer, prompts, next(model.parameters()).device)
    options.setdefault("eos_token_id", tokenizer.eos_token_id)
    options.setdefault("pad_token_id", pad_id(tokenizer))
    generation = sample(model, ids, mask, max_new_tokens, tokenizer=tokenizer, **options)
    return generation.decode(tokenizer), generation


def generate_text(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    prompts: Sequence[str],
    max_new_tokens: int = 32,
    **options: object,
) -> list[str]:
    """The greedy continuations (prompt excluded, special tokens dropped) of each prompt string; ``options``
    as for ``sample`` (``temperature > 0`` samples)."""
    options.setdefault("temperature", 0.0)
    return sample_text(model, tokenizer, prompts, max_new_tokens, **options)[0]


def token_logprobs(
    model: PreTrainedModel,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor | None = None,
    temperature: float = 1.0,
    **model_kwargs: object,
) -> torch.Tensor:
    """``(B, L − 1)``: log p(x_t | x_<t) for t = 1..L−1 under softmax(logits / temperature) of a causal
    model (0 where x_t or x_{t−1} is padding; left padding does not shift positions).

    Gradients flow, so the same function serves policy-gradient losses (with the sampling temperature it
    recomputes ``Generation.logprobs``); wrap it in ``torch.no_grad()`` when only scoring.
    """
    require_causal(model, "token_logprobs")
    inputs = model_inputs({"attention_mask": attention_mask, **model_kwargs})
    logits = model(input_ids=input_ids, **inputs).logits[:, :-1].float()
    logprobs = torch.log_softmax(logits / temperature, -1).gather(-1, input_ids[:, 1:, None])[..., 0]
    if attention_mask is not None:  # a token counts when it and its predecessor are real
        logprobs = logprobs * (attention_mask[:, 1:] * attention_mask[:, :-1])
    return logprobs


@torch.no_grad()
def score_continuations(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    prompts: Sequence[str],
    continuations: Sequence[str],
    batch_size: int = 32,
) -> dict[str, torch.Tensor]:
    """Log p(continuation | prompt) for each pair, with prompt and continuation encoded separately.

    Returns ``logprob (N,)`` (summed over the continuation's tokens), ``n_tokens (N,)``, ``n_bytes (N,)``
    (UTF-8 bytes of the continuation) and ``greedy (N,)`` (True if every continuation token is the argmax).
    A prompt must have at least one token; the continuation's first token is scored from the prompt's last.
    """
    require_causal(model, "score_continuations")
    if len(prompts) != len(continuations):
        raise ValueError(f"{len(prompts)} prompts but {len(continuations)} continuations")
    encode = tokenizer.backend_tokenizer.encode_batch
    prompt_ids = [e.ids for e in encode(list(prompts), add_special_tokens=False)]
    cont_ids = [e.ids for e in encode(list(continuations), add_special_tokens=False)]
    if any(len(p) == 0 for p in prompt_ids):
        raise ValueError(
            "every prompt needs at least one token (prepend the EOS token to score from scratch)"
        )
    device = next(model.parameters()).device
    logprob, greedy = [], []
    for start in range(0, len(prompt_ids), batch_size):
        rows = range(start, min(start + batch_size, len(prompt_ids)))
        ids, mask = pad_sequences([prompt_ids[i] + cont_ids[i] for i in rows], pad_id(tokenizer))
        ids, mask = ids.to(device), mask.to(device)
        logits = model(input_ids=ids, attention_mask=mask).logits[:, :-1].float()
        lp = torch.gather(logits.log_softmax(-1), -1, ids[:, 1:, None])[..., 0]
        is_max = logits.argmax(-1) == ids[:, 1:]
        positions = torch.arange(ids.shape[1] - 1, device=device)[None]
        first = torch.tensor([len(prompt_ids[i]) - 1 for i in rows], device=device)[:, None]
        count = torch.tensor([len(cont_ids[i]) for i in rows], device=device)[:, None]
        in_continuation = (positions >= first) & (positions < first + count)
        logprob.append((lp * in_continuation).sum(1).cpu())
        greedy.append((is_max | ~in_continuation).all(1).cpu())
    return {
        "logprob": torch.cat(logprob),
        "n_tokens": torch.tensor([len(c) for c in cont_ids]),
        "n_bytes": torch.tensor([len(c.encode("utf-8")) for c in continuations]),
        "greedy": torch.cat(greedy),
    }
