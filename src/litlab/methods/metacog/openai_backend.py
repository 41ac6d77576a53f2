"""An OpenAI-compatible chat-completions endpoint as a subject (vLLM, llama.cpp server, TGI, hosted APIs).

Greedy (temperature 0) replies with the first token's top log-probs, read into per-label log-probs where
the endpoint returns them. Standard library only (urllib); the key is read from an environment variable.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from litlab.core.errors import LitlabError
from litlab.lm.chat_models import post_json
from litlab.methods.metacog.backends import Query, Reply


class OpenAIBackend:
    """``POST {base_url}/chat/completions`` per query.

    Args: base_url (e.g. ``http://localhost:8000/v1``), model, max_tokens, top_logprobs (0 = none asked),
    api_key_env (the environment variable holding the key, if any), timeout in seconds.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        max_tokens: int = 8,
        top_logprobs: int = 10,
        api_key_env: str | None = "OPENAI_API_KEY",
        timeout: float = 60.0,
    ) -> None:
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model, self.max_tokens, self.top_logprobs, self.timeout = (
            model,
            max_tokens,
            top_logprobs,
            timeout,
        )
        self.api_key = os.environ.get(api_key_env) if api_key_env else None
        self.name = f"openai:{model}"

    def payload(self, query: Query) -> dict[str, Any]:
        """The request body of one query."""
        body: dict[str, Any] = {
            "model": self.model,
            "messages": list(query.messages),
            "temperature": 0,
            "max_tokens": self.max_tokens,
        }
        if self.top_logprobs:
            body |= {"logprobs": True, "top_logprobs": self.top_logprobs}
        return body

    def _post(self, body: dict[str, Any]) -> dict[str, Any]:
        return post_json(self.url, body, self.api_key, self.timeout)

    def complete(self, queries: Sequence[Query]) -> list[Reply]:
        """One request per query (a failure raises after the earlier batches were stored)."""
        return [parse_response(self._post(self.payload(q)), q.labels) for q in queries]


def parse_response(response: dict[str, Any], labels: Sequence[str]) -> Reply:
    """The reply text and, from the first generated token's ``top_logprobs``, log p of each label found
    there (a label's best-scoring spelling, ignoring surrounding spaces and case)."""
    try:
        choice = response["choices"][0]
        text = choice["message"]["content"] or ""
    except (KeyError, IndexError, TypeError) as error:
        raise LitlabError(f"unexpected chat-completions response: {str(response)[:200]}") from error
    content = (choice.get("logprobs") or {}).get("content") or []
    if not content:
        return Reply(text)
    wanted = {label.upper(): label for label in labels}
    logprobs: dict[str, float] = {}
    for entry in content[0].get("top_logprobs") or []:
        label = wanted.get(str(entry["token"]).strip().upper())
        if label is not None and entry["logprob"] > logprobs.get(label, -float("inf")):
            logprobs[label] = float(entry["logprob"])
    return Reply(text, logprobs or None)
