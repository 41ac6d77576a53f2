"""Chat templates and multi-turn state: the default template's text, fine-tuning labels on answers only,
replies equal to generation from the rendered prompt, cache reuse across turns, forks, and templates that
cannot be encoded turn by turn refused."""

from __future__ import annotations

import copy
from collections.abc import Callable

import pytest
import torch
from transformers import PreTrainedTokenizerBase

from litlab.core.errors import LitlabError
from litlab.lm.chat import DEFAULT_CHAT_TEMPLATE, Conversation, chat_template, encode_chat, render_chat
from litlab.lm.generation import generate

DIALOGUE = [
    {"role": "system", "content": "Answer briefly."},
    {"role": "user", "content": "Who founded Kalo Works?"},
    {"role": "assistant", "content": "Rex Dorhal."},
    {"role": "user", "content": "And when?"},
]


def test_default_template_ends_every_turn_with_eos(tokenizer: PreTrainedTokenizerBase) -> None:
    text = render_chat(tokenizer, DIALOGUE, add_generation_prompt=True)
    assert text == (
        "<|system|>\nAnswer briefly.<|endoftext|><|user|>\nWho founded Kalo Works?<|endoftext|>"
        "<|assistant|>\nRex Dorhal.<|endoftext|><|user|>\nAnd when?<|endoftext|><|assistant|>\n"
    )
    assert chat_template(tokenizer) == DEFAULT_CHAT_TEMPLATE
    own = copy.deepcopy(tokenizer)
    own.chat_template = "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
    assert render_chat(own, DIALOGUE[:2]) == "system: Answer briefly.\nuser: Who founded Kalo Works?\n"


def test_encode_chat_learns_only_the_answers(tokenizer: PreTrainedTokenizerBase) -> None:
    conversations = [DIALOGUE + [{"role": "assistant", "content": "In 1901."}], DIALOGUE[1:3]]
    batch = encode_chat(tokenizer, conversations)
    eos = tokenizer.eos_token_id
    for row, messages in enumerate(conversations):
        answers = [tokenizer.encode(m["content"]) + [eos] for m in messages if m["role"] == "assistant"]
        labels = batch["labels"][row]
        assert labels[labels != -100].tolist() == [t for a in answers for t in a]
        n = int(batch["attention_mask"][row].sum())
        assert tokenizer.decode(batch["input_ids"][row, :n]) == render_chat(tokenizer, messages)
    assert batch["attention_mask"][1].sum() < batch["attention_mask"][0].sum()


def _runs(model: torch.nn.Module) -> list[int]:
    runs: list[int] = []
    model.model.embed_tokens.register_forward_pre_hook(lambda module, args: runs.append(args[0].shape[1]))
    return runs


def test_replies_reuse_the_cache_and_equal_uncached_generation(
    tiny_lm: Callable, tokenizer: PreTrainedTokenizerBase
) -> None:
    model = tiny_lm("causal", initializer_range=0.3)
    conversation = Conversation(model, tokenizer, DIALOGUE[:2])
    runs = _runs(model)
    first = conversation.reply(max_new_tokens=6)
    assert conversation.messages[-1] == {"role": "assistant", "content": first}
    conversation.add("user", "Say more.")
    prompt = list(conversation.ids) + tokenizer.encode("<|assistant|>\n")
    runs.clear()
    second = conversation.reply(max_new_tokens=6)
    assert runs[0] < len(prompt) // 2  # only the new turn is run, not the whole conversation
    reference = generate(model, torch.tensor([prompt]), max_new_tokens=6, eos_token_id=tokenizer.eos_token_id)
    new = reference[0, len(prompt) :].tolist()
    new = new[: new.index(tokenizer.eos_token_id)] if tokenizer.eos_token_id in new else new
    assert second == tokenizer.decode(new, skip_special_tokens=True)


def test_a_reply_ended_by_eos_keeps_its_sampled_tokens(
    tiny_lm: Callable, tokenizer: PreTrainedTokenizerBase
) -> None:
    model = tiny_lm("causal", initializer_range=0.3)
    calls = []

    def eos_on_third_call(module: torch.nn.Module, args: tuple, logits: torch.Tensor) -> torch.Tensor:
        calls.append(1)
        return logits.index_add(
            -1, torch.tensor([0]), torch.full_like(logits[..., :1], 1e4 * (len(calls) == 3))
        )

    conversation = Conversation(model, tokenizer, DIALOGUE[:2])
    handle = model.lm_head.register_forward_hook(eos_on_third_call)
    first = conversation.reply(max_new_tokens=8)  # two sampled tokens, then EOS
    handle.remove()
    assert (
        conversation.ids[-1] == tokenizer.eos_token_id and tokenizer.decode(conversation.ids[-3:-1]) == first
    )
    conversation.add("user", "Again?")
    prompt = conversation.ids + tokenizer.encode("<|assistant|>\n")
    second = conversation.reply(max_new_tokens=6)  # runs on the cache left by the EOS-ended reply
    reference = generate(model, torch.tensor([prompt]), max_new_tokens=6)[0, len(prompt) :]
    assert second == tokenizer.decode(reference, skip_special_tokens=True)


def test_forks_continue_independently(tiny_lm: Callable, tokenizer: PreTrainedTokenizerBase) -> None:
    """The Second Chance game's use: one history, answers replayed shown or redacted."""
    model = tiny_lm("causal", initializer_range=0.3)
    base = Conversation(model, tokenizer, DIALOGUE[:2])
    base.reply(max_new_tokens=5)
    shown, redacted = base.fork(), base.fork()
    redacted.messages[-1]["content"] = "[redacted]"
    redacted = Conversation(model, tokenizer, redacted.messages)
    for branch in (shown, redacted):
        branch.add("user", "Your answer was incorrect. Choose a different answer.")
    replies = [branch.reply(max_new_tokens=5) for branch in (shown, redacted)]
    fresh = Conversation(model, tokenizer, [*base.messages, shown.messages[-2]])
    assert replies[0] == fresh.reply(max_new_tokens=5)
    assert len(base.messages) == 3 and len(shown.messages) == 5


def test_templates_that_are_not_prefix_stable_are_refused(
    tiny_lm: Callable, tokenizer: PreTrainedTokenizerBase
) -> None:
    reversed_order = "{% for m in messages | reverse %}{{ m['content'] }}\n{% endfor %}"
    with pytest.raises(LitlabError, match="prefixes are stable"):
        encode_chat(tokenizer, [DIALOGUE], template=reversed_order)
    with pytest.raises(LitlabError, match="prefixes are stable"):
        Conversation(tiny_lm("causal"), tokenizer, DIALOGUE, template=reversed_order)
