"""Per-document scores and embeddings of long documents: windows of many documents batched together keep
their document ids, so each document's score equals scoring it alone and its embedding does not depend on
the batching or on the other documents."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
from transformers import PreTrainedTokenizerBase

from litlab.lm.documents import document_embeddings, document_windows, score_documents
from litlab.lm.evaluation import evaluate_text


@pytest.fixture
def documents(shakespeare: str) -> list[str]:
    """Documents from a few characters to several windows long, one with non-ASCII text."""
    return [
        shakespeare[:40],
        shakespeare[100:900],
        "O 日本, ROMEO!",
        shakespeare[2000:2300],
        shakespeare[5000:6400],
    ]


@pytest.mark.parametrize("stride", [None, 16])
def test_each_document_scores_as_if_alone(
    tiny_lm: Callable, tokenizer: PreTrainedTokenizerBase, documents: list[str], stride: int | None
) -> None:
    model = tiny_lm("causal", initializer_range=0.1)
    scores = score_documents(model, tokenizer, documents, window=32, stride=stride, batch_size=5)
    for index, text in enumerate(documents):
        alone = evaluate_text(model, tokenizer, text, window=32, stride=stride)
        assert int(scores["bytes"][index]) == alone["bytes"] == len(text.encode())
        assert int(scores["tokens"][index]) == alone["tokens"]
        assert float(scores["bpb"][index]) == pytest.approx(alone["bpb"], rel=1e-5)


def test_windows_keep_their_document_ids(tokenizer: PreTrainedTokenizerBase, documents: list[str]) -> None:
    windows = document_windows(tokenizer, documents, window=32)
    for index, text in enumerate(documents):
        rows = windows["doc_ids"] == index
        labels = windows["labels"][rows]
        assert labels[labels != -100].tolist() == tokenizer.encode(text, add_special_tokens=False)


def test_embeddings_are_mean_hidden_states_whatever_the_batching(
    tiny_lm: Callable, tokenizer: PreTrainedTokenizerBase, documents: list[str]
) -> None:
    model = tiny_lm("causal", initializer_range=0.1)
    embeddings = document_embeddings(model, tokenizer, documents, window=32, batch_size=3)
    assert embeddings.shape == (5, 32)
    short = tokenizer.encode(documents[2], add_special_tokens=False)  # fits one window: a direct mean
    with torch.no_grad():
        hidden = model(input_ids=torch.tensor([[0, *short]]), output_hidden_states=True).hidden_states[-1]
    assert torch.allclose(embeddings[2], hidden[0, 1:].mean(0), atol=1e-5)
    order = [4, 2, 0, 3, 1]
    shuffled = document_embeddings(model, tokenizer, [documents[i] for i in order], window=32, batch_size=7)
    assert torch.allclose(shuffled, embeddings[order], atol=1e-5)


def test_diffusion_documents_get_a_reproducible_bound(
    tiny_lm: Callable, tokenizer: PreTrainedTokenizerBase, documents: list[str]
) -> None:
    model = tiny_lm("masked_diffusion", initializer_range=0.1)
    first = score_documents(model, tokenizer, documents, window=32, n_draws=2, seed=1)
    assert torch.equal(
        first["nll"], score_documents(model, tokenizer, documents, window=32, n_draws=2, seed=1)["nll"]
    )
    assert first["bytes"].tolist() == [len(t.encode()) for t in documents] and (first["nll"] > 0).all()
