"""MGA through ``litlab.lm.chat_models.OpenAIChat`` against a local server that plays a good LLM: the pair
prompt answered with five pairs, each rewrite prompt by the genre grammars; a failing request is one clear
error and the rerun asks again only the batch that was in flight."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from litlab.core.errors import LitlabError
from litlab.lm.chat_models import OpenAIChat
from litlab.methods.mga.grammar import AUDIENCES, GENRES, rewrite
from litlab.methods.mga.pipeline import run_pipeline
from litlab.methods.mga.stages import LLMBackend
from litlab.methods.mga.tasks import fact_documents
from tests.chat_endpoint import JSONHandler, serving

DOCS = fact_documents(6, seed=7)
BY_TEXT = {d["text"]: d for d in DOCS}
PAIRS = [(g, a) for g, a in zip(GENRES, AUDIENCES, strict=False)]


def _answer(prompt: str) -> str:
    text = prompt.split("[Text]\n", 1)[1].strip()
    if prompt.startswith("Rewrite"):
        genre, audience = re.match(r"Rewrite the text below as (.+?) \(.*?\)\nfor (.+?) \(", prompt).groups()
        document = BY_TEXT[text]
        return rewrite(genre, audience, document["name"], document["kind"], document["facts"], 0)
    pairs = [{"genre": {"title": g, "description": GENRES[g]}, "audience": a} for g, a in PAIRS]
    return "```json\n" + json.dumps({"analysis": "facts about one entity", "pairs": pairs}) + "\n```"


class Endpoint(JSONHandler):
    prompts: list[str] = []
    fail_at: int | None = None

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        body = self.json_body()
        if Endpoint.fail_at is not None and len(Endpoint.prompts) == Endpoint.fail_at:
            Endpoint.fail_at = None
            self.send_error_status()
            return
        prompt = body["messages"][0]["content"]
        Endpoint.prompts.append(prompt)
        self.send_json({"choices": [{"message": {"content": _answer(prompt)}}]})


@pytest.fixture
def endpoint() -> Iterator[str]:
    Endpoint.prompts, Endpoint.fail_at = [], None
    with serving(Endpoint) as url:
        yield url


def test_mga_through_an_openai_endpoint_resumes_after_a_failed_request(endpoint: str, tmp_path: Path) -> None:
    llm = LLMBackend(OpenAIChat(endpoint, "tiny", api_key_env=None))
    Endpoint.fail_at = len(DOCS) + 7  # every pair prompt, then 7 rewrites, then a server error
    with pytest.raises(LitlabError, match="request failed"):
        run_pipeline(DOCS, {"pairs": llm, "rewrite": llm}, tmp_path, batch_size=4)
    result = run_pipeline(DOCS, {"pairs": llm, "rewrite": llm}, tmp_path, batch_size=4)
    # outputs are stored a batch at a time: only the 3 requests of the batch in flight are asked again
    assert len(set(Endpoint.prompts)) == len(DOCS) * 6 and len(Endpoint.prompts) == len(DOCS) * 6 + 7 % 4
    assert result["counts"]["kept"] == 5 * len(DOCS)
    assert {(r["genre"], r["audience"]) for r in result["corpus"]} == set(PAIRS)
    rewrites = [p for p in Endpoint.prompts if p.startswith("Rewrite")]
    assert all(f"as {g} ({GENRES[g]})\nfor {a} (" in p for p in rewrites for g, a in PAIRS if f"as {g} " in p)
