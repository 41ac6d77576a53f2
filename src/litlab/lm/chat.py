"""Chat templates and multi-turn conversations for causal LMs.

A conversation is a list of ``{"role", "content"}`` messages rendered by a Jinja chat template: the
tokenizer's own (``tokenizer.chat_template``, e.g. a local Qwen or Llama checkpoint) or, for the byte-level
BPEs trained here, ``DEFAULT_CHAT_TEMPLATE``, which ends every turn with the EOS token so that generation
stops there::

    <|user|>\\nWho founded Kalo Works?<|endoftext|><|assistant|>\\nRex Dorhal.<|endoftext|>

Both ``encode_chat`` (supervised fine-tuning: labels on the assistant turns only) and ``Conversation``
(multi-turn generation that reuses the KV cache of everything said so far) encode a conversation turn by
turn, as the differences between renderings of growing prefixes, which needs a template whose rendering of
a prefix is a prefix of the rendering of the whole (checked).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from litlab.core.errors import LitlabError
from litlab.datamodules.text import IGNORE_INDEX
from litlab.lm.decoding import DecodeState
from litlab.lm.generation import decode, pad_id

DEFAULT_CHAT_TEMPLATE = (
    "{% for message in messages %}<|{{ message['role'] }}|>\n{{ message['content'] }}{{ eos_token }}"
    "{% endfor %}{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)
Message = Mapping[str, str]


def chat_template(tokenizer: PreTrainedTokenizerBase) -> str:
    """The tokenizer's chat template, else ``DEFAULT_CHAT_TEMPLATE``."""
    return tokenizer.chat_template or DEFAULT_CHAT_TEMPLATE


def render_chat(
    tokenizer: PreTrainedTokenizerBase,
    messages: Sequence[Message],
    add_generation_prompt: bool = False,
    template: str | None = None,
) -> str:
    """The conversation as text (``template`` or ``chat_template(tokenizer)``); with
    ``add_generation_prompt`` it ends where the assistant's answer starts."""
    return tokenizer.apply_chat_template(
        [dict(m) for m in messages],
        chat_template=template or chat_template(tokenizer),
        tokenize=False,
        add_generation_prompt=add_generation_prompt,
    )


def chat_segments(
    tokenizer: PreTrainedTokenizerBase, messages: Sequence[Message], template: str | None = None
) -> list[tuple[str, bool]]:
    """The rendered conversation cut into ``(text, is_answer)`` pieces whose concatenation is the whole:
    each assistant turn's answer (``is_answer``, up to its end-of-turn marker) and the text between."""
    pieces: list[tuple[str, bool]] = []
    done = ""
    for index, message in enumerate(messages):
        if message["role"] == "assistant":
            prompt = render_chat(tokenizer, messages[:index], True, template)
            _check_prefix(done, prompt)
            pieces.append((prompt[len(done) :], False))
            done = prompt
        rendered = render_chat(tokenizer, messages[: index + 1], False, template)
        _check_prefix(done, rendered)
        pieces.append((rendered[len(done) :], message["role"] == "assistant"))
        done = rendered
    return [(text, answer) for text, answer in pieces if text]


def _check_prefix(prefix: str, text: str) -> None:
    if not text.startswith(prefix):
        raise LitlabError(
            "the chat template renders a conversation's start differently from the whole conversation; "
            "turn-by-turn encoding needs a template whose prefixes are stable"
        )


def _encode(tokenizer: PreTrainedTokenizerBase, text: str) -> list[int]:
    return tokenizer.backend_tokenizer.encode(text, add_special_tokens=False).ids if text else []


def encode_chat(
    tokenizer: PreTrainedTokenizerBase,
    conversations: Sequence[Sequence[Message]],
    max_length: int | None = None,
    template: str | None = None,
) -> dict[str, torch.Tensor]:
    """Right-padded ``input_ids``, ``attention_mask`` and ``labels`` ``(N, L)`` for supervised fine-tuning
    on conversations: labels are -100 everywhere but on the assistants' answers (with their end-of-turn
    marker). Pieces are encoded separately, as ``Conversation`` does; ``max_length`` truncates on the
    right (default: the longest conversation)."""
    rows = []
    for messages in conversations:
        ids: list[int] = []
        learn: list[bool] = []
        for text, answer in chat_segments(tokenizer, messages, template):
            piece = _encode(tokenizer, text)
            ids += piece
            learn += [answer] * len(piece)
        rows.append((ids, learn))
    length = max_length or max(len(ids) for ids, _ in rows)
    input_ids = torch.full((len(rows), length), pad_id(tokenizer), dtype=torch.long)
    labels = torch.full((len(rows), length), IGNORE_INDEX, dtype=torch.long)
    attention = torch.zeros((len(rows), length), dtype=torch.long)
    for row, (ids, learn) in enumerate(rows):
        ids, learn = ids[:length], torch.tensor(learn[:length], dtype=torch.bool)
        input_ids[row, : len(ids)] = torch.tensor(ids, dtype=torch.long)
        attention[row, : len(ids)] = 1
        labels[row, : len(ids)] = torch.where(learn, input_ids[row, : len(ids)], IGNORE_INDEX)
    return {"input_ids": input_ids, "attention_mask": attention, "labels": labels}


@dataclass
class Conversation:
    """A multi-turn conversation with a causal LM that keeps the KV cache of everything said so far.

    ``add`` appends a message, ``reply`` generates the assistant's next turn (running only the tokens not
    yet in the cache) and appends it, ``fork`` copies the conversation to branch it (the copies share the
    cached prefix). ``ids`` are the tokens the model has seen or will see, turn by turn: a reply that ends
    with EOS keeps its sampled tokens, any other is re-encoded with the end-of-turn marker.
    """

    model: PreTrainedModel
    tokenizer: PreTrainedTokenizerBase
    messages: list[dict[str, str]] = field(default_factory=list)
    template: str | None = None
    ids: list[int] = field(default_factory=list)
    _rendered: str = field(default="", repr=False)
    _state: DecodeState | None = field(default=None, repr=False)
    _cached: int = field(default=0, repr=False)  # how many of ``ids`` the state has run

    def __post_init__(self) -> None:
        messages, self.messages = self.messages, []
        for message in messages:
            self.add(message["role"], message["content"])

    def add(self, role: str, content: str) -> Conversation:
        """Append a message (any role) and its tokens."""
        self.messages.append({"role": role, "content": content})
        rendered = render_chat(self.tokenizer, self.messages, False, self.template)
        _check_prefix(self._rendered, rendered)
        self.ids += _encode(self.tokenizer, rendered[len(self._rendered) :])
        self._rendered = rendered
        return self

    def fork(self) -> Conversation:
        """An independent copy that shares the cache computed so far."""
        twin = copy.copy(self)
        twin.messages, twin.ids = [dict(m) for m in self.messages], list(self.ids)
        return twin

    def _state_for(self, ids: list[int]) -> DecodeState:
        device = next(self.model.parameters()).device
        if self._state is None or self._cached == 0:
            return DecodeState.prefill(self.model, torch.tensor([ids], device=device))
        new = torch.tensor([ids[self._cached :]], device=device)
        return self._state if new.numel() == 0 else self._state.append(new)

    def reply(self, max_new_tokens: int = 64, **options: object) -> str:
        """Generate and append the assistant's next turn (``options`` as for ``sample``: greedy unless
        ``temperature > 0``; EOS ends the turn); returns its text."""
        prompt = render_chat(self.tokenizer, self.messages, True, self.template)
        _check_prefix(self._rendered, prompt)
        prompt_ids = self.ids + _encode(self.tokenizer, prompt[len(self._rendered) :])
        state = self._state_for(prompt_ids)
        eos = self.tokenizer.eos_token_id
        options = {"temperature": 0.0, "eos_token_id": eos, "pad_token_id": pad_id(self.tokenizer), **options}
        out = decode(state, max_new_tokens, tokenizer=self.tokenizer, **options)
        tokens = out.tokens[0][out.mask[0]].tolist()
        text = self.tokenizer.decode(tokens, skip_special_tokens=True)
        stops = [text.find(s) for s in options.get("stop_strings", ()) if s in text]
        text = text[: min(stops)] if stops else text
        self.messages.append({"role": "assistant", "content": text})
        rendered = render_chat(self.tokenizer, self.messages, False, self.template)
        _check_prefix(prompt, rendered)
        if bool(out.finished[0]) and not stops and tokens and tokens[-1] == eos:
            self.ids = prompt_ids + tokens  # the sampled tokens, EOS included, as the model saw them
            self._state, self._cached = out.state, len(self.ids) - 1
        else:
            self.ids = prompt_ids + _encode(self.tokenizer, rendered[len(prompt) :])
            self._state, self._cached = state, len(prompt_ids)
        self._rendered = rendered
        return text
