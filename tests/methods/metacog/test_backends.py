"""The OpenAI-compatible backend against a local http.server, and the local-LM backend against direct
scoring of each prompt alone."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from litlab.core.errors import LitlabError
from litlab.datamodules.metacog_questions import make_questions, qa_document
from litlab.datamodules.tokenizers import train_bpe, wrap_tokenizer
from litlab.lm import build_lm, llama_config, render_chat, score_continuations
from litlab.methods.metacog.games import capabilities_queries, load_prompts
from litlab.methods.metacog.local import LocalLMBackend
from litlab.methods.metacog.openai_backend import OpenAIBackend
from litlab.methods.metacog.store import run_queries
from tests.chat_endpoint import RecordingHandler, recording


class Endpoint(RecordingHandler):
    """Answers "B" with first-token log-probs; records every request body; fails once when told to."""

    def reply(self, body: dict) -> dict:
        top = [
            {"token": " B", "logprob": -0.1},
            {"token": "A", "logprob": -2.5},
            {"token": "b", "logprob": -4.0},
            {"token": "Hello", "logprob": -6.0},
        ]
        first = {"token": " B", "logprob": -0.1, "top_logprobs": top}
        message = {"role": "assistant", "content": "B"}
        return {"choices": [{"message": message, "logprobs": {"content": [first]}}]}


@pytest.fixture
def endpoint() -> Iterator[str]:
    with recording(Endpoint) as url:
        yield url


def test_openai_backend_requests_greedy_replies_and_reads_label_logprobs(
    endpoint: str, tmp_path: Path
) -> None:
    queries = capabilities_queries(make_questions(5, 0), load_prompts("capabilities"))
    backend = OpenAIBackend(endpoint, "tiny", api_key_env=None)
    Endpoint.fail_next = True
    with pytest.raises(LitlabError, match="request failed"):
        run_queries(backend, queries, tmp_path / "a.jsonl", batch_size=2)
    records = run_queries(backend, queries, tmp_path / "a.jsonl", batch_size=2)  # resumes after the failure
    body = Endpoint.bodies[-1]
    assert (
        body["temperature"] == 0
        and body["model"] == "tiny"
        and body["logprobs"]
        and body["top_logprobs"] == 10
    )
    assert body["messages"] == list(queries[-1].messages)
    assert [r["label"] for r in records] == ["B"] * 5 and len(Endpoint.bodies) == 6
    assert records[0]["logprobs"] == {"B": -0.1, "A": -2.5}  # best spelling per label; others ignored


@pytest.fixture(scope="module")
def tiny_lm() -> tuple[torch.nn.Module, object]:
    docs = [qa_document(q) for q in make_questions(200, 0)]
    tokenizer = wrap_tokenizer(train_bpe(docs, 300))
    torch.manual_seed(0)
    model = build_lm(llama_config(len(tokenizer), hidden_size=32, num_layers=1, num_heads=2), "causal")
    return model.eval(), tokenizer


def test_local_backend_equals_scoring_each_prompt_alone(tiny_lm: tuple) -> None:
    model, tokenizer = tiny_lm
    items = make_questions(4, 1)
    items[0] = {
        **items[0],
        "question": items[0]["question"] + " Think about it carefully.",
    }  # unequal lengths
    queries = capabilities_queries(items, load_prompts("capabilities"))
    backend = LocalLMBackend(model, tokenizer, max_new_tokens=3)
    batched = backend.complete(queries)
    for query, reply in zip(queries, batched, strict=True):
        alone = backend.complete([query])[0]
        assert alone.text == reply.text
        prompt = render_chat(tokenizer, query.messages, add_generation_prompt=True)
        direct = score_continuations(model, tokenizer, [prompt] * 4, list("ABCD"))["logprob"]
        spaced = score_continuations(model, tokenizer, [prompt] * 4, [" A", " B", " C", " D"])
        one_token = spaced["n_tokens"] == 1  # " X" as one token is a second spelling of the label
        direct = torch.where(one_token, torch.logaddexp(direct, spaced["logprob"]), direct)
        torch.testing.assert_close(
            torch.tensor([reply.logprobs[k] for k in "ABCD"]), direct.float(), atol=1e-4, rtol=0
        )


def test_local_backend_counts_a_label_written_after_a_space(tiny_lm: tuple) -> None:
    """The noticed bug: only the bare label's token was read, so a model answering " B" (most HF models
    after "Answer:") got P(B) ≈ 0. Both spellings count now; a bare-space first token never does."""
    model, _ = tiny_lm
    answers = [f"The answer is {label}." for label in "ABCD"] * 50  # merges " A" .. " D" into tokens
    tokenizer = wrap_tokenizer(train_bpe(answers + ["1 2 T"], 300))
    backend = LocalLMBackend(model, tokenizer)
    encode = tokenizer.backend_tokenizer.encode
    label = "B"
    assert len(encode(" B", add_special_tokens=False).ids) == 1
    bare, space = encode(label).ids[0], encode(f" {label}").ids[0]
    assert backend.label_ids(label) == [bare, space]
    logp = torch.full((len(tokenizer),), -30.0)
    logp[space] = -0.1  # the model writes " B"
    logp[bare] = -3.0
    assert backend.label_logprobs(logp, [label])[label] == pytest.approx(
        float(torch.logaddexp(logp[bare], logp[space]))
    )
    # a label whose spaced form starts with a bare space token counts its own token only
    unspaced = [label for label in "ABCDT12" if len(encode(f" {label}", add_special_tokens=False).ids) > 1]
    for label in unspaced:
        assert backend.label_ids(label) == [encode(label).ids[0]]


def test_training_documents_are_the_capabilities_conversation_the_backend_renders(tiny_lm: tuple) -> None:
    from litlab.datamodules.metacog_questions import LABELS, SYSTEM, USER

    _, tokenizer = tiny_lm
    prompts = load_prompts("capabilities")
    assert (prompts["system"], prompts["user"]) == (SYSTEM, USER)
    q = make_questions(1, 0)[0]
    query = capabilities_queries([q], prompts)[0]
    rendered = render_chat(
        tokenizer, [*query.messages, {"role": "assistant", "content": LABELS[q["answer"]]}]
    )
    assert rendered == qa_document(q)
    assert tokenizer.encode("<|endoftext|>", add_special_tokens=False) == [tokenizer.eos_token_id]
