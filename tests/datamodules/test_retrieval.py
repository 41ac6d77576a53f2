"""Retrieval corpora: the planted generator (shapes, gold sets, determinism, cache) and the
tinyshakespeare passages, span queries and (span, passage) batches."""

from __future__ import annotations

import pytest
import torch

from litlab.core.errors import ConfigError
from litlab.datamodules.retrieval import (
    PassagePairDataModule,
    PlantedConfig,
    TokenCorpus,
    build_planted_corpus,
    planted_corpus,
    planted_span_queries,
    ragged_rows,
)

SMALL = {"n_docs": 200, "dim": 16, "min_tokens": 3, "max_tokens": 7, "n_concepts": 32, "n_queries": 5}


def test_planted_corpus_layout_and_gold_sets() -> None:
    config = PlantedConfig(**SMALL, query_tokens=10, duplicates=3)
    corpus = build_planted_corpus(config)
    assert corpus.n_docs == 200 + 5 * (3 + 3)
    assert corpus.n_queries == 5 and corpus.query(0).shape == (10, 16)
    lengths = corpus.doc_offsets.diff()
    assert lengths[:200].min() >= 3 and lengths[:200].max() <= 7
    assert torch.allclose(corpus.doc_vectors.norm(dim=1), torch.ones(len(corpus.doc_vectors)), atol=1e-5)
    assert torch.equal(corpus.gold, torch.arange(200, 215).view(5, 3))
    # Each query token is closest to a token of its own gold document (shares 5 / 3 / 2 of 10).
    for i in range(5):
        best_doc = []
        for token in corpus.query(i):
            sims = corpus.doc_vectors @ token
            best_doc.append(int(torch.searchsorted(corpus.doc_offsets, sims.argmax(), right=True)) - 1)
        gold = corpus.gold_set(i)
        owners = [gold[0]] * 5 + [gold[1]] * 3 + [gold[2]] * 2
        dup_first = 215 + 3 * i
        assert all(
            b == o or (o == gold[0] and dup_first <= b < dup_first + 3) for b, o in zip(best_doc, owners)
        )


def test_planted_corpus_is_seeded_and_cached(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("LITLAB_CACHE", str(tmp_path))
    a = planted_corpus(PlantedConfig(**SMALL))
    b = planted_corpus(PlantedConfig(**SMALL))
    assert len(list((tmp_path / "retrieval").glob("planted-*.safetensors"))) == 1
    for name, tensor in a.tensors().items():
        assert torch.equal(tensor, getattr(b, name))
    c = planted_corpus(PlantedConfig(**{**SMALL, "seed": 1}), cache=False)
    assert not torch.equal(a.doc_vectors[:10], c.doc_vectors[:10])


def test_bad_planted_configs_are_config_errors() -> None:
    with pytest.raises(ConfigError, match="min_tokens"):
        PlantedConfig(min_tokens=5, max_tokens=4)
    with pytest.raises(ConfigError, match="shares"):
        PlantedConfig(shares=(1.0, 0.0, 1.0))


def test_token_corpus_checks_offsets_and_ragged_rows() -> None:
    with pytest.raises(ValueError, match="doc_offsets"):
        TokenCorpus(
            torch.zeros(4, 2),
            torch.tensor([0, 3]),
            torch.zeros(1, 2),
            torch.tensor([0, 1]),
            torch.zeros(1, 1),
        )
    rows, slot = ragged_rows(torch.tensor([0, 2, 5, 6]), torch.tensor([2, 0, 1]))
    assert rows.tolist() == [5, 0, 1, 2, 3, 4] and slot.tolist() == [0, 1, 1, 2, 2, 2]


def test_span_queries_are_made_of_their_gold_passages() -> None:
    passages = torch.arange(40 * 10).view(40, 10)
    queries, gold = planted_span_queries(passages, torch.arange(30, 40), 6, (4, 3, 2), seed=0)
    assert queries.shape == (6, 9) and gold.shape == (6, 3)
    assert ((gold >= 30) & (gold < 40)).all() and all(len(set(g.tolist())) == 3 for g in gold)
    for q, g in zip(queries, gold):
        for part, passage in zip(q.split([4, 3, 2]), g):
            assert set(part.tolist()) <= set(passages[passage].tolist())
    with pytest.raises(ConfigError, match="spans"):
        planted_span_queries(passages, torch.arange(30, 40), 2, (11,), seed=0)


def test_passage_pair_batches_and_spec() -> None:
    data = PassagePairDataModule(max_bytes=60_000, batch_size=8, n_eval_queries=4, vocab_size=400)
    batch = next(iter(data.train_dataloader()))
    assert batch["query"].shape == (8, 12) and batch["passage"].shape == (8, 24)
    for ids, mask, passage in zip(batch["query"], batch["query_mask"], batch["passage"]):
        span = ids[mask].tolist()
        assert 4 <= len(span) <= 12
        row = passage.tolist()
        assert any(row[i : i + len(span)] == span for i in range(24 - len(span) + 1))
        assert (ids[~mask] == data.splits.pad_id).all()
    spec = data.data_spec()
    assert spec["eval_queries"].shape == (4, 16) and spec["eval_gold"].shape == (4, 3)
    assert (spec["eval_gold"] >= int(data.splits.test[0])).all()
    with pytest.raises(ConfigError, match="batch_size"):
        PassagePairDataModule(batch_size=1)
