"""Text-in, text-out chat models shared by the LLM-pipeline papers (Webscale-RL, MGA): an OpenAI-compatible
endpoint and a local causal LM.

Both speak one protocol, ``complete(conversations) -> texts``, and know nothing of any pipeline.
``parse_json`` reads JSON replies (code fences and trailing commas tolerated).
"""

from __future__ import annotations

import json
import os
import re
import urllib.error
import urllib.request
from collections.abc import Sequence
from typing import Any, Protocol

from litlab.core.errors import LitlabError

Conversation = Sequence[dict[str, str]]


class ChatModel(Protocol):
    """Answers a batch of chat conversations in order, one text per conversation."""

    name: str

    def complete(self, conversations: Sequence[Conversation]) -> list[str]: ...


def post_json(url: str, body: dict[str, Any], api_key: str | None, timeout: float) -> dict[str, Any]:
    """POST ``body`` as JSON (with a bearer key if given) and return the JSON reply; a failed request is a
    one-line LitlabError that says a rerun resumes."""
    headers = {"Content-Type": "application/json"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    request = urllib.request.Request(url, json.dumps(body).encode(), headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return json.loads(response.read())
    except (urllib.error.URLError, TimeoutError, ValueError) as error:
        raise LitlabError(f"{url}: request failed ({error}); rerun to resume where it stopped") from error


class OpenAIChat:
    """``POST {base_url}/chat/completions`` per conversation (vLLM, llama.cpp server, TGI, hosted APIs).

    Args: base_url (e.g. ``http://localhost:8000/v1``), model, temperature (the official pipeline samples at
    1.0), max_tokens, api_key_env (the environment variable holding the key, if any), timeout in seconds.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        temperature: float = 1.0,
        max_tokens: int = 512,
        api_key_env: str | None = "OPENAI_API_KEY",
        timeout: float = 120.0,
    ) -> None:
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model, self.temperature, self.max_tokens, self.timeout = model, temperature, max_tokens, timeout
        self.api_key = os.environ.get(api_key_env) if api_key_env else None
        self.name = f"openai:{model}"

    def _post(self, body: dict[str, Any]) -> dict[str, Any]:
        return post_json(self.url, body, self.api_key, self.timeout)

    def complete(self, conversations: Sequence[Conversation]) -> list[str]:
        """One request per conversation; the reply's message content."""
        texts = []
        for messages in conversations:
            body = {"model": self.model, "messages": list(messages), "temperature": self.temperature}
            response = self._post(body | {"max_tokens": self.max_tokens})
            try:
                texts.append(response["choices"][0]["message"]["content"] or "")
            except (KeyError, IndexError, TypeError) as error:
                raise LitlabError(f"unexpected chat-completions response: {str(response)[:200]}") from error
        return texts


class LocalChat:
    """A local causal LM (a litlab tiny LM or any Hugging Face checkpoint folder): the conversation rendered
    by the tokenizer's chat template, then sampled (temperature > 0, seeded) or greedy (temperature 0)."""

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        max_new_tokens: int = 256,
        temperature: float = 0.0,
        seed: int = 0,
        name: str = "local",
    ) -> None:
        self.model, self.tokenizer = model.eval(), tokenizer
        self.max_new_tokens, self.temperature, self.seed, self.name = max_new_tokens, temperature, seed, name

    @classmethod
    def from_pretrained(cls, path: str, **options: Any) -> LocalChat:
        """A chat model from a local checkpoint folder (``litlab.lm.load_pretrained``)."""
        from litlab.lm import load_pretrained

        model, tokenizer = load_pretrained(path)
        return cls(model, tokenizer, name=f"local:{path}", **options)

    def complete(self, conversations: Sequence[Conversation]) -> list[str]:
        """Replies to a batch of conversations (one batched generation)."""
        from litlab.lm import generate_text, render_chat, sample_text

        if not conversations:
            return []
        prompts = [render_chat(self.tokenizer, list(c), add_generation_prompt=True) for c in conversations]
        if self.temperature == 0:
            return generate_text(self.model, self.tokenizer, prompts, self.max_new_tokens)
        texts, _ = sample_text(
            self.model,
            self.tokenizer,
            prompts,
            self.max_new_tokens,
            temperature=self.temperature,
            seed=self.seed,
        )
        return texts


_FENCE = re.compile(r"```(?:json)?")
_TRAILING_COMMA = re.compile(r",\s*([}\]])")


def parse_json(text: str) -> dict[str, Any] | None:
    """The first JSON object in a reply (code fences and trailing commas tolerated), or None."""
    text = _FENCE.sub("", text)
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end <= start:
        return None
    try:
        value = json.loads(_TRAILING_COMMA.sub(r"\1", text[start : end + 1]))
    except ValueError:
        return None
    return value if isinstance(value, dict) else None
