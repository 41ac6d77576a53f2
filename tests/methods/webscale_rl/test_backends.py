"""The LLM backends: the OpenAI-compatible client against a local server that plays a perfect LLM (it
answers each stage's prompt by our rules), and a local causal LM against generating each prompt alone."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from litlab.core.errors import LitlabError
from litlab.datamodules.tokenizers import train_bpe, wrap_tokenizer
from litlab.datamodules.webscale_rl import make_corpus
from litlab.lm import build_lm, generate_text, llama_config, render_chat
from litlab.lm.chat_models import LocalChat, OpenAIChat
from litlab.methods.webscale_rl.pipeline import run_pipeline
from litlab.methods.webscale_rl.stages import (
    STAGES,
    LLMBackend,
    RuleBackend,
    rule_check,
    rule_filter,
    rule_generate,
    rule_identify,
)
from litlab.methods.webscale_rl.tasks import procedural_demonstrations
from tests.chat_endpoint import RecordingHandler, recording

CORPUS = make_corpus(30, seed=4)


def _field(prompt: str, name: str) -> str:
    return re.search(rf"\[{name}\]\n(.*?)\n\n(?:\[|Reply)", prompt, re.DOTALL).group(1)


def _answer(prompt: str) -> dict:
    """What a perfect LLM replies: the stage read off the prompt, the rule's labels as Y/N."""
    item = {"key": "k", "text": _field(prompt, "Material")}
    if prompt.startswith("You are a data labeller"):
        labels = rule_check(
            item | {"question": _field(prompt, "Question"), "answer": _field(prompt, "Answer")}
        )
        return {k: "Y" if v else "N" for k, v in labels.items()}
    if "[Persona]" in prompt:
        return rule_generate(item | {"persona": _field(prompt, "Persona")})
    if "Assign it exactly one domain" in prompt:
        return rule_identify(item)
    return {"qualified": "Y" if rule_filter(item)["qualified"] else "N"}


class Endpoint(RecordingHandler):
    def reply(self, body: dict) -> dict:
        content = "```json\n" + json.dumps({"thought": "..."} | _answer(body["messages"][0]["content"]))[:-1]
        return {"choices": [{"message": {"role": "assistant", "content": content + ",\n}\n```"}}]}


@pytest.fixture
def endpoint() -> Iterator[str]:
    with recording(Endpoint) as url:
        yield url


def _run(backends: dict, folder: Path) -> dict:
    return run_pipeline(
        CORPUS["documents"], CORPUS["eval"], backends, folder, shard_size=16, batch_size=4,
        demonstrations=procedural_demonstrations(0),
    )  # fmt: skip


def test_the_openai_backend_through_a_perfect_llm_equals_the_rules(endpoint: str, tmp_path: Path) -> None:
    llm = LLMBackend(OpenAIChat(endpoint, "tiny", temperature=1.0, api_key_env=None))
    via_http = _run(dict.fromkeys(STAGES, llm), tmp_path / "http")
    rules = _run(dict.fromkeys(STAGES, RuleBackend()), tmp_path / "rules")
    assert via_http["qa"] == rules["qa"] and via_http["counts"] == rules["counts"]
    assert {b["model"] for b in Endpoint.bodies} == {"tiny"} and Endpoint.bodies[0]["temperature"] == 1.0
    generate = [
        b["messages"][0]["content"] for b in Endpoint.bodies if "[Persona]" in b["messages"][0]["content"]
    ]
    assert generate and all(p.count("\nQuestion: ") == 2 for p in generate)  # two demonstrations each


def test_a_failing_endpoint_is_one_clear_error_and_the_rerun_resumes(endpoint: str, tmp_path: Path) -> None:
    llm = LLMBackend(OpenAIChat(endpoint, "tiny", api_key_env=None))
    backends = dict.fromkeys(STAGES, llm)
    _run(backends, tmp_path)
    asked = len(Endpoint.bodies)
    Endpoint.bodies = []
    for path in (tmp_path / "shards").glob("*.json"):
        path.unlink()
    (tmp_path / "stages" / "check" / "shard00001.jsonl").unlink()
    Endpoint.fail_next = True
    with pytest.raises(LitlabError, match="request failed"):
        _run(backends, tmp_path)
    result = _run(backends, tmp_path)
    assert result["complete"] and 0 < len(Endpoint.bodies) < asked


@pytest.fixture(scope="module")
def tiny_chat() -> LocalChat:
    torch.manual_seed(0)
    tokenizer = wrap_tokenizer(train_bpe([d["text"] for d in CORPUS["documents"]], 300))
    model = build_lm(llama_config(len(tokenizer), hidden_size=32, num_layers=1, num_heads=2))
    return LocalChat(model, tokenizer, max_new_tokens=6)


def test_the_local_backend_equals_generating_each_prompt_alone(tiny_chat: LocalChat) -> None:
    conversations = [
        [{"role": "user", "content": d["text"][:n]}] for d, n in zip(CORPUS["documents"], (20, 90, 40))
    ]
    together = tiny_chat.complete(conversations)
    for conversation, text in zip(conversations, together, strict=True):
        prompt = render_chat(tiny_chat.tokenizer, conversation, add_generation_prompt=True)
        assert generate_text(tiny_chat.model, tiny_chat.tokenizer, [prompt], 6) == [text]


def test_an_untrained_local_lm_gives_unparseable_replies_that_are_counted(
    tiny_chat: LocalChat, tmp_path: Path
) -> None:
    backends = dict.fromkeys(STAGES, RuleBackend()) | {"check": LLMBackend(tiny_chat)}
    result = _run(backends, tmp_path)
    counts = result["counts"]
    assert counts["check_unparseable"] == counts["qa_generated"] > 0 and result["qa"] == []
