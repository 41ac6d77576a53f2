"""Generation and scoring for causal and masked-diffusion LMs: greedy and sampled decoding, token
log-probabilities, scores of given continuations, and LLaDA's masked-diffusion sampler.

All functions take plain tensors (or strings plus a tokenizer) and leave the global RNG untouched: sampling
is seeded by ``seed`` or a ``torch.Generator``, so the same call returns the same tokens.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

DiffusionForward = Callable[[torch.Tensor, int], torch.Tensor]


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


def _pad_id(tokenizer: PreTrainedTokenizerBase) -> int:
    return tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id


@torch.no_grad()
def generate(
    model: PreTrainedModel,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor | None = None,
    max_new_tokens: int = 32,
    do_sample: bool = False,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    eos_token_id: int | None = None,
    pad_token_id: int | None = None,
    seed: int = 0,
) -> torch.Tensor:
    """Causal decoding with transformers' ``generate`` (KV cache): ``(B, P)`` prompts, left-padded when they
    differ in length, → ``(B, P + new)``. Greedy unless ``do_sample``; sampling draws from
    softmax(logits / temperature), filtered only by the given ``top_k``/``top_p``, with a forked RNG seeded
    by ``seed``, so repeated calls agree and the caller's RNG state is unchanged."""
    options: dict[str, object] = {"do_sample": do_sample, "max_new_tokens": max_new_tokens}
    if (
        do_sample
    ):  # top_k=0 and top_p=1 switch off transformers' default top-50 filter: plain softmax sampling
        options.update(temperature=temperature, top_k=top_k or 0, top_p=1.0 if top_p is None else top_p)
    else:
        options.update(temperature=None, top_p=None, top_k=None)
    if eos_token_id is not None:
        options["eos_token_id"] = eos_token_id
    pad = pad_token_id if pad_token_id is not None else model.generation_config.pad_token_id
    devices = [input_ids.device] if input_ids.device.type == "cuda" else []
    with torch.random.fork_rng(devices=devices):
        torch.manual_seed(seed)
        return model.generate(
            input_ids=input_ids,
            attention_mask=attention_mask if attention_mask is not None else torch.ones_like(input_ids),
            pad_token_id=pad if pad is not None else eos_token_id,
            **options,
        )


def generate_text(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    prompts: Sequence[str],
    max_new_tokens: int = 32,
    **options: object,
) -> list[str]:
    """The decoded continuations (prompt excluded, special tokens dropped) of each prompt string."""
    encoded = tokenizer(list(prompts), add_special_tokens=False)["input_ids"]
    ids, mask = pad_sequences(encoded, _pad_id(tokenizer), side="left")
    device = next(model.parameters()).device
    options.setdefault("eos_token_id", tokenizer.eos_token_id)
    output = generate(
        model, ids.to(device), mask.to(device), max_new_tokens, pad_token_id=_pad_id(tokenizer), **options
    )
    return tokenizer.batch_decode(output[:, ids.shape[1] :], skip_special_tokens=True)


def token_logprobs(
    model: PreTrainedModel, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None
) -> torch.Tensor:
    """``(B, L − 1)``: log p(x_t | x_<t) for t = 1..L−1 under a causal model (padding positions → 0).

    Gradients flow, so the same function serves policy-gradient losses; wrap it in ``torch.no_grad()``
    when only scoring.
    """
    logits = model(input_ids=input_ids, attention_mask=attention_mask).logits[:, :-1].float()
    targets = input_ids[:, 1:]
    logprobs = torch.gather(logits.log_softmax(-1), -1, targets[..., None])[..., 0]
    if attention_mask is not None:
        logprobs = logprobs * attention_mask[:, 1:]
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
        ids, mask = pad_sequences([prompt_ids[i] + cont_ids[i] for i in rows], _pad_id(tokenizer))
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


def transfer_counts(n_masked: torch.Tensor, steps: int) -> torch.Tensor:
    """``(B, steps)``: how many tokens each step unmasks, n // steps each and the remainder on the first
    steps (LLaDA's ``get_num_transfer_tokens``). ``n_masked: (B,)``."""
    base = n_masked[:, None] // steps
    remainder = n_masked[:, None] % steps
    return base + (torch.arange(steps, device=n_masked.device)[None] < remainder).long()


def _gumbel_argmax(
    logits: torch.Tensor, temperature: float, generator: torch.Generator | None
) -> torch.Tensor:
    """LLaDA's sampling: argmax of exp(logits) / (−log u)^temperature in float64 (Gumbel-max at T = 1)."""
    if temperature == 0:
        return logits.argmax(-1)
    logits = logits.double()
    noise = torch.rand(logits.shape, dtype=torch.float64, device=logits.device, generator=generator)
    return (logits.exp() / (-noise.log()) ** temperature).argmax(-1)


@torch.no_grad()
def diffusion_generate(
    model: PreTrainedModel | None,
    prompt_ids: torch.Tensor,
    gen_length: int,
    steps: int,
    mask_token_id: int,
    block_length: int | None = None,
    temperature: float = 0.0,
    remasking: str = "low_confidence",
    generator: torch.Generator | None = None,
    forward: DiffusionForward | None = None,
) -> torch.Tensor:
    """LLaDA's reverse process: ``(B, P)`` prompts → ``(B, P + gen_length)`` with every mask filled.

    The answer is decoded in ``gen_length / block_length`` semi-autoregressive blocks, each in
    ``steps / n_blocks`` steps. At each step the model predicts every masked token (Gumbel-max at
    ``temperature``, argmax at 0) and the ``transfer_counts`` most confident predictions in the current
    block are kept ('low_confidence' remasking: confidence = softmax probability of the prediction;
    'random': uniform scores). ``forward(x, step) -> logits`` replaces ``model(x).logits`` when given, so a
    method can change the attention per global step (SparseD).
    """
    if remasking not in ("low_confidence", "random"):
        raise ValueError(f"remasking={remasking!r}; choose low_confidence or random")
    block_length = block_length or gen_length
    if gen_length % block_length or steps % (gen_length // block_length):
        raise ValueError("gen_length must be a multiple of block_length, and steps of the number of blocks")
    if forward is None:
        if model is None:
            raise ValueError("give a model or a forward(x, step) function")

        def forward(x: torch.Tensor, step: int) -> torch.Tensor:
            return model(input_ids=x).logits

    batch, prompt_length = prompt_ids.shape
    x = torch.full(
        (batch, prompt_length + gen_length), mask_token_id, dtype=torch.long, device=prompt_ids.device
    )
    x[:, :prompt_length] = prompt_ids
    n_blocks = gen_length // block_length
    steps_per_block = steps // n_blocks
    positions = torch.arange(x.shape[1], device=x.device)[None]
    step = 0
    for block in range(n_blocks):
        block_end = prompt_length + (block + 1) * block_length
        in_block = x[:, prompt_length + block * block_length : block_end] == mask_token_id
        counts = transfer_counts(in_block.sum(1), steps_per_block)
        for inner in range(steps_per_block):
            masked = x == mask_token_id
            logits = forward(x, step)
            prediction = _gumbel_argmax(logits, temperature, generator)
            if remasking == "low_confidence":
                probs = logits.float().softmax(-1)
                confidence = torch.gather(probs, -1, prediction[..., None])[..., 0]
            else:
                confidence = torch.rand(x.shape, device=x.device, generator=generator)
            confidence = confidence.masked_fill(~masked | (positions >= block_end), -torch.inf)
            order = confidence.argsort(dim=1, descending=True, stable=True)
            rank = torch.empty_like(order).scatter_(1, order, positions.expand_as(order))
            transfer = (rank < counts[:, inner : inner + 1]) & masked & (positions < block_end)
            x = torch.where(transfer, prediction, x)
            step += 1
    return x
