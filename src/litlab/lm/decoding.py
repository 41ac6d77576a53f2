"""Step-wise causal decoding with KV-cache reuse, for sampling loops and tree or beam search.

A :class:`DecodeState` holds a batch of partial sequences, their KV cache and the next-token logits of each
row. ``append``, ``score`` and ``select`` return new states and never change the old one (cache updates
concatenate new tensors, and a fork copies only the list of layers), so a search branches from any state
without recomputing its prefix. Rows may be left-padded (prompts) and chunks right-padded; positions are
counted over real tokens, so models with absolute positions (GPT-2) see what an unpadded row would.
"""

from __future__ import annotations

import copy
import inspect
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import torch
from transformers import DynamicCache, PreTrainedModel

from litlab.core.errors import LitlabError
from litlab.lm.models import position_ids, require_causal


@lru_cache(maxsize=32)
def _cache_keyword(model_class: type) -> str:
    """transformers renamed ``past_key_values`` to ``cache`` during 5.x; take the one this model has."""
    for cls in model_class.__mro__:  # the first forward that names its cache argument
        forward = cls.__dict__.get("forward")
        parameters = inspect.signature(forward).parameters if forward is not None else {}
        for name in ("cache", "past_key_values"):
            if name in parameters:
                return name
    return "past_key_values"


def model_forward(model: PreTrainedModel, input_ids: torch.Tensor, cache: Any, **kwargs: Any) -> torch.Tensor:
    """``(B, L, V)`` logits of ``model`` on ``input_ids`` after the positions held in ``cache`` (it grows)."""
    return model(input_ids=input_ids, use_cache=True, **{_cache_keyword(type(model)): cache}, **kwargs).logits


def new_cache(model: PreTrainedModel) -> DynamicCache:
    """An empty dynamic KV cache for ``model``."""
    return DynamicCache(config=model.config)


def fork_cache(
    cache: DynamicCache, rows: torch.Tensor | None = None, length: int | None = None
) -> DynamicCache:
    """A copy of ``cache`` holding batch ``rows`` (repeats allowed) and the first ``length`` positions; the
    tensors are shared or indexed, never written, so ``cache`` stays valid."""
    fork = copy.copy(cache)
    fork.layers = [copy.copy(layer) for layer in cache.layers]
    for layer in fork.layers:
        if getattr(layer, "keys", None) is None or layer.keys.numel() == 0:
            continue
        if length is not None and getattr(layer, "is_sliding", False):
            raise LitlabError("a sliding-window KV cache cannot be cut to a prefix")
        for name in ("keys", "values"):
            tensor = getattr(layer, name)
            if rows is not None:
                tensor = tensor[rows.to(tensor.device)]
            if length is not None:
                tensor = tensor[..., :length, :]
            setattr(layer, name, tensor)
    return fork


def _last_real(mask: torch.Tensor) -> torch.Tensor:
    """``(N,)`` index of the last 1 in each row of ``mask`` (0 for rows without one)."""
    steps = torch.arange(mask.shape[1], device=mask.device)
    return (mask.bool() * steps).amax(1)


@dataclass(frozen=True)
class DecodeState:
    """A batch of partial sequences of a causal LM with their KV cache (see the module docstring).

    Attributes:
        model: the causal LM (in eval mode for decoding).
        cache: the KV cache of every position so far.
        attention_mask: ``(N, L)`` long, 1 on real tokens, 0 on padding.
        logits: ``(N, V)`` float, the next-token logits after each row's last real token.
        model_kwargs: extra forward keywords (e.g. a ``block_mask``) passed on every step.
    """

    model: PreTrainedModel
    cache: DynamicCache
    attention_mask: torch.Tensor
    logits: torch.Tensor
    model_kwargs: dict[str, Any] = field(default_factory=dict)

    @classmethod
    @torch.no_grad()
    def prefill(
        cls,
        model: PreTrainedModel,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        **model_kwargs: Any,
    ) -> DecodeState:
        """Run the prompts ``input_ids: (N, P)`` (left-padded where ``attention_mask`` is 0) once."""
        require_causal(model, "DecodeState")
        mask = torch.ones_like(input_ids) if attention_mask is None else attention_mask.long()
        cache = new_cache(model)
        logits = model_forward(
            model, input_ids, cache, attention_mask=mask, position_ids=position_ids(mask), **model_kwargs
        )
        last = logits[torch.arange(len(input_ids), device=logits.device), _last_real(mask)]
        return cls(model, cache, mask, last.float(), dict(model_kwargs))

    @property
    def rows(self) -> int:
        return self.attention_mask.shape[0]

    @property
    def length(self) -> int:
        """Positions held by the cache (padding included)."""
        return self.attention_mask.shape[1]

    def logprobs(self, temperature: float = 1.0) -> torch.Tensor:
        """``(N, V)``: log softmax(logits / temperature) of the next token."""
        return torch.log_softmax(self.logits / temperature, dim=-1)

    def select(self, rows: torch.Tensor) -> DecodeState:
        """The state of ``rows`` (an index into this batch; repeat a row to branch it)."""
        rows = rows.to(self.attention_mask.device)
        return DecodeState(
            self.model,
            fork_cache(self.cache, rows=rows),
            self.attention_mask[rows],
            self.logits[rows],
            self.model_kwargs,
        )

    @torch.no_grad()
    def _extend(self, tokens: torch.Tensor, mask: torch.Tensor | None) -> tuple[torch.Tensor, DecodeState]:
        tokens = tokens[:, None] if tokens.ndim == 1 else tokens
        chunk = torch.ones_like(tokens) if mask is None else mask.long()
        full = torch.cat([self.attention_mask, chunk], dim=1)
        cache = fork_cache(self.cache)
        logits = model_forward(
            self.model,
            tokens,
            cache,
            attention_mask=full,
            position_ids=position_ids(full)[:, -tokens.shape[1] :],
            **self.model_kwargs,
        ).float()
        rows = torch.arange(len(tokens), device=tokens.device)
        last = torch.where(chunk.any(1)[:, None], logits[rows, _last_real(chunk)], self.logits)
        return logits, DecodeState(self.model, cache, full, last, self.model_kwargs)

    def append(self, tokens: torch.Tensor, mask: torch.Tensor | None = None) -> DecodeState:
        """The state after appending ``tokens: (N,)`` or ``(N, k)``; ``mask: (N, k)`` marks real tokens of
        a right-padded chunk (padding is never attended to and does not advance positions)."""
        return self._extend(tokens, mask)[1]

    def score(
        self, tokens: torch.Tensor, mask: torch.Tensor | None = None, temperature: float = 1.0
    ) -> tuple[torch.Tensor, DecodeState]:
        """``(N, k)`` log-probs of appending ``tokens`` (each given everything before it, under
        softmax(logits / temperature); 0 on padding) and the state after them."""
        tokens = tokens[:, None] if tokens.ndim == 1 else tokens
        logits, state = self._extend(tokens, mask)
        previous = torch.cat([self.logits[:, None], logits[:, :-1]], dim=1)
        logprobs = torch.log_softmax(previous / temperature, dim=-1)
        chosen = logprobs.gather(-1, tokens[..., None])[..., 0]
        return chosen if mask is None else chosen * mask, state


@torch.no_grad()
def beam_search(
    model: PreTrainedModel,
    input_ids: torch.Tensor,
    num_beams: int,
    max_new_tokens: int,
    attention_mask: torch.Tensor | None = None,
    eos_token_id: int | None = None,
    pad_token_id: int = 0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Beam search by summed log-probability: ``(B, P)`` prompts → ``sequences (B, num_beams, P + T)`` and
    ``scores (B, num_beams)``, best first. A beam that emits ``eos_token_id`` is finished: it keeps its
    score and is padded with ``pad_token_id``. No length penalty; exhaustive when
    ``num_beams ≥ V^(T − 1)``."""
    state = DecodeState.prefill(model, input_ids, attention_mask)
    batch, vocab = len(input_ids), state.logits.shape[-1]
    device = state.logits.device
    state = state.select(torch.arange(batch, device=device).repeat_interleave(num_beams))
    scores = torch.full((batch, num_beams), -torch.inf, device=device)
    scores[:, 0] = 0.0  # identical beams at the start: expand only the first
    finished = torch.zeros(batch, num_beams, dtype=torch.bool, device=device)
    tokens = torch.zeros(batch, num_beams, 0, dtype=torch.long, device=device)
    pad_only = torch.full((vocab,), -torch.inf, device=device)
    pad_only[pad_token_id] = 0.0
    for step in range(max_new_tokens):
        logprobs = state.logprobs().view(batch, num_beams, vocab)
        logprobs = torch.where(finished[..., None], pad_only, logprobs)
        top, index = (scores[..., None] + logprobs).view(batch, -1).topk(num_beams, dim=-1)
        beam, token = index // vocab, index % vocab
        was_finished = finished.gather(1, beam)
        tokens = torch.cat([tokens.gather(1, beam[..., None].expand_as(tokens)), token[..., None]], dim=2)
        scores = top
        finished = was_finished | (token == eos_token_id if eos_token_id is not None else False)
        if step + 1 == max_new_tokens or finished.all():
            break
        rows = (torch.arange(batch, device=device)[:, None] * num_beams + beam).view(-1)
        state = state.select(rows).append(token.view(-1), (~was_finished).view(-1, 1))
    prompts = input_ids[:, None].expand(batch, num_beams, input_ids.shape[1])
    return torch.cat([prompts, tokens], dim=2), scores
