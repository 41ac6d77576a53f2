"""The DISCo index against brute force in the explicit Φ space, its two engines and backends, and its
file format (round trip, corruption, version)."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import save_file

import litlab.methods.disco.ivf as ivf
from litlab.core.errors import ConfigError, LitlabError
from litlab.datamodules.retrieval import PlantedConfig, planted_corpus
from litlab.methods.disco.index import DiscoIndex, SearchStats
from litlab.methods.disco.lift import hinge, lift_corpus, lift_queries
from litlab.methods.disco.objective import START, coverage, greedy, maxsim_rows, top_k_maxsim

BACKENDS = ["torch"] + (["faiss"] if ivf.faiss_available() else [])


@pytest.fixture(scope="module")
def corpus():
    config = PlantedConfig(
        n_docs=300,
        dim=16,
        min_tokens=4,
        max_tokens=10,
        n_concepts=64,
        n_queries=6,
        query_tokens=12,
        duplicates=4,
    )
    return planted_corpus(config, cache=False)


@pytest.fixture(scope="module")
def index(corpus):
    return DiscoIndex.build(corpus.doc_vectors, corpus.doc_offsets, nlist=16, replicas=4, backend="torch")


def test_layout_stores_every_token_once_and_finds_each_document(corpus, index) -> None:
    assert int(index.list_offsets[-1]) == len(corpus.doc_vectors)
    doc = 17
    rows = torch.arange(int(corpus.doc_offsets[doc]), int(corpus.doc_offsets[doc + 1]))
    torch.testing.assert_close(
        index.vectors[rows], torch.nn.functional.normalize(corpus.doc_vectors[rows], dim=1)
    )
    assert (index.token_doc[rows] == doc).all()
    # Every token sits in exactly one list, the list of its nearest centroid.
    assert torch.equal(
        index.list_tokens.sort().values, torch.arange(len(corpus.doc_vectors), dtype=torch.int32)
    )
    lists = torch.repeat_interleave(torch.arange(16), index.list_offsets.diff())
    assert torch.equal(lists, (index.vectors[index.list_tokens.long()] @ index.centroids.T).argmax(1))


def explicit_estimate(index, queries, state, k_tokens):
    """Σ_q max(0, max over c's tokens retrieved in some replica of Φ_r(q̂)ᵀΦ_r(x̂)), with explicit Φ vectors:
    replica r retrieves, for each q, the k_tokens best tokens (by qᵀx) on the side of Φ_r(q̂)."""
    x_hat, q_hat = lift_corpus(index.vectors), lift_queries(queries, state)
    n_docs = len(index.doc_offsets) - 1
    best = torch.zeros(n_docs, len(queries))
    for w in index.planes:
        phi = hinge(q_hat, w) @ hinge(x_hat, w).T  # (m, M)
        same_side = ((q_hat @ w >= 0)[:, None]) == ((x_hat @ w >= 0)[None, :])
        ranked = (queries @ index.vectors.T).masked_fill(~same_side, -float("inf"))
        for q in range(len(queries)):
            top = ranked[q].topk(k_tokens).indices if k_tokens else same_side[q].nonzero().squeeze(1)
            docs = index.token_doc[top].long()
            best[:, q] = best[:, q].scatter_reduce(0, docs, phi[q, top], "amax")
    return best.sum(1)


@pytest.mark.parametrize("k_tokens", [None, 3])
def test_estimated_gains_equal_the_explicit_phi_space_computation(corpus, index, k_tokens) -> None:
    queries = torch.nn.functional.normalize(corpus.query(0), dim=1)
    rows = maxsim_rows(corpus.doc_vectors, corpus.doc_offsets, queries)
    for state in (torch.full((len(queries),), START), rows[[3, 40]].max(0).values):
        cand = index.candidates(queries, nprobe=16, k_tokens=k_tokens, prefix=10_000, engine="torch")
        expected = explicit_estimate(index, queries, state, k_tokens)[cand.docs]
        torch.testing.assert_close(index.estimated_gains(cand, queries, state), expected, atol=1e-4, rtol=0)


def test_full_probing_with_a_full_pool_is_exact_greedy(corpus, index) -> None:
    for i in range(corpus.n_queries):
        q = corpus.query(i)
        rows = maxsim_rows(corpus.doc_vectors, corpus.doc_offsets, torch.nn.functional.normalize(q, dim=1))
        stats = SearchStats()
        found = index.search(q, 5, nprobe=16, k_tokens=None, pool=1000, engine="torch", stats=stats)
        expected = greedy(rows, 5)
        # Same picks while gains are positive; once everything is covered, ties at zero may differ.
        prefix = [coverage(rows[found[:j]]) for j in range(1, 6)]
        assert prefix == pytest.approx([coverage(rows[expected[:j]]) for j in range(1, 6)], abs=1e-5)
        assert found[:3] == expected[:3]
        assert stats.candidates == corpus.n_docs and stats.rounds == 5
        assert index.maxsim_topk(q, 5, nprobe=16, k_tokens=None, pool=1000, engine="torch") == top_k_maxsim(
            rows, 5
        )


@pytest.mark.skipif("faiss" not in BACKENDS, reason="faiss-cpu (litlab[disco]) is not installed")
def test_faiss_and_torch_engines_retrieve_the_same_tokens(corpus, index) -> None:
    queries = torch.nn.functional.normalize(corpus.query(1), dim=1)
    a = index.candidates(queries, nprobe=3, k_tokens=4, engine="torch")
    b = index.candidates(queries, nprobe=3, k_tokens=4, engine="faiss")
    torch.testing.assert_close(a.scores, b.scores)
    assert torch.equal(a.docs, b.docs)
    for i in range(corpus.n_queries):
        q = corpus.query(i)
        assert index.search(q, 6, nprobe=3, engine="torch") == index.search(q, 6, nprobe=3, engine="faiss")


@pytest.mark.parametrize("backend", BACKENDS)
def test_each_backend_builds_an_index_that_covers_like_greedy(corpus, backend) -> None:
    built = DiscoIndex.build(corpus.doc_vectors, corpus.doc_offsets, nlist=16, replicas=8, backend=backend)
    assert built.config["backend"] == backend
    assert torch.allclose(built.centroids.norm(dim=1), torch.ones(16), atol=1e-4)
    for i in range(corpus.n_queries):
        q = torch.nn.functional.normalize(corpus.query(i), dim=1)
        rows = maxsim_rows(corpus.doc_vectors, corpus.doc_offsets, q)
        found = built.search(q, 3, nprobe=4, k_tokens=16, pool=16)
        assert rows[found].max(0).values.sum() >= 0.97 * rows[greedy(rows, 3)].max(0).values.sum()


def test_missing_faiss_is_a_one_line_pip_hint(monkeypatch) -> None:
    monkeypatch.setattr(ivf, "faiss_available", lambda: False)
    with pytest.raises(LitlabError, match=r"pip install 'litlab\[disco\]'"):
        ivf.resolve_backend("faiss")
    assert ivf.resolve_backend("auto") == "torch"
    with pytest.raises(ConfigError, match="backend"):
        ivf.resolve_backend("annoy")


def test_saved_index_loads_back_and_returns_the_same_sets(corpus, index, tmp_path) -> None:
    path = index.save(tmp_path / "disco.safetensors")
    loaded = DiscoIndex.load(path)
    assert loaded.config == index.config
    for name, tensor in index.tensors().items():
        assert torch.equal(tensor, getattr(loaded, name)), name
    for i in range(corpus.n_queries):
        assert loaded.search(corpus.query(i), 5) == index.search(corpus.query(i), 5)
    with pytest.raises(LitlabError, match="exists"):
        index.save(path)


def test_corrupted_truncated_foreign_or_other_version_files_are_clear_errors(index, tmp_path) -> None:
    path = index.save(tmp_path / "disco.safetensors")
    data = bytearray(path.read_bytes())
    data[-5] ^= 0xFF
    (tmp_path / "flipped.safetensors").write_bytes(bytes(data))
    with pytest.raises(LitlabError, match="corrupted"):
        DiscoIndex.load(tmp_path / "flipped.safetensors")
    (tmp_path / "short.safetensors").write_bytes(path.read_bytes()[:100])
    with pytest.raises(LitlabError, match="not a readable DISCo index"):
        DiscoIndex.load(tmp_path / "short.safetensors")
    with safe_open(path, framework="pt") as handle:
        tensors = {name: handle.get_tensor(name) for name in handle.keys()}  # noqa: SIM118
        metadata = dict(handle.metadata())
    save_file(tensors, tmp_path / "v2.safetensors", metadata={**metadata, "version": "2"})
    with pytest.raises(LitlabError, match="version 2"):
        DiscoIndex.load(tmp_path / "v2.safetensors")
    save_file({"x": torch.zeros(2)}, tmp_path / "other.safetensors", metadata={"format": "something"})
    with pytest.raises(LitlabError, match="not a DISCo index"):
        DiscoIndex.load(tmp_path / "other.safetensors")
    with pytest.raises(LitlabError, match="no DISCo index"):
        DiscoIndex.load(tmp_path / "missing.safetensors")
    assert json.loads(metadata["config"])["replicas"] == 4


def test_eager_and_lazy_exact_rows_choose_the_same_documents(corpus, index) -> None:
    for i in range(corpus.n_queries):
        q = corpus.query(i)
        lazy, eager = SearchStats(), SearchStats()
        assert index.search(q, 6, eager_tokens=0, stats=lazy) == index.search(q, 6, stats=eager)
        assert lazy.exact_rows < eager.exact_rows == eager.candidates


def test_relifted_index_shares_lists_and_changes_only_the_codes(corpus, index) -> None:
    unlifted = index.relifted(False)
    assert unlifted.planes.shape == (4, 16) and not unlifted.lifted and index.lifted
    assert unlifted.centroids is index.centroids and not torch.equal(unlifted.codes, index.codes)
    rebuilt = DiscoIndex.build(
        corpus.doc_vectors, corpus.doc_offsets, nlist=16, replicas=4, backend="torch", lifting=False
    )
    assert torch.equal(rebuilt.codes, unlifted.codes)


def test_bad_search_arguments_are_config_errors(corpus, index) -> None:
    with pytest.raises(ConfigError, match="k, nprobe"):
        index.search(corpus.query(0), 0)
    with pytest.raises(ConfigError, match="replicas=5"):
        index.search(corpus.query(0), 2, replicas=5)
