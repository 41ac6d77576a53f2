"""The token encoder, its LightningModule, and the study task at a tiny size."""

from __future__ import annotations

import pytest
import torch

from litlab.core.errors import ConfigError
from litlab.datamodules.retrieval import PassagePairDataModule
from litlab.methods.disco.encoder import TokenEncoder, encode_corpus, maxsim_matrix
from litlab.methods.disco.module import COVERAGE_METRICS, ColbertEncoder
from litlab.methods.disco.study import disco_study, log_slope
from litlab.task import TaskContext


def test_encoder_gives_unit_contextual_vectors_and_ignores_padding() -> None:
    torch.manual_seed(0)
    encoder = TokenEncoder(50, dim=8, hidden=16, layers=1, heads=2, max_length=10).eval()
    ids = torch.randint(3, 50, (2, 6))
    out = encoder(ids)
    assert out.shape == (2, 6, 8) and torch.allclose(out.norm(dim=-1), torch.ones(2, 6), atol=1e-5)
    changed = ids.clone()
    changed[:, -1] = 1
    # Contextual: changing the last token moves the first token's vector.
    assert not torch.allclose(encoder(changed)[:, 0], out[:, 0])
    mask = torch.ones(2, 6, dtype=torch.bool)
    mask[:, -1] = False
    assert torch.allclose(encoder(ids, mask)[:, :5], encoder(changed, mask)[:, :5], atol=1e-5)


def test_maxsim_matrix_matches_a_loop() -> None:
    gen = torch.Generator().manual_seed(1)
    q, p = torch.randn(3, 4, 5, generator=gen), torch.randn(2, 6, 5, generator=gen)
    mask = torch.tensor([[1, 1, 0, 0], [1, 1, 1, 1], [1, 0, 0, 0]], dtype=torch.float)
    expected = torch.tensor(
        [[float(((q[i] @ p[j].T).max(1).values * mask[i]).sum()) for j in range(2)] for i in range(3)]
    )
    torch.testing.assert_close(maxsim_matrix(q, mask, p), expected)


def test_encode_corpus_keeps_every_token() -> None:
    encoder = TokenEncoder(30, dim=4, hidden=8, layers=1, heads=2, max_length=8)
    corpus = encode_corpus(
        encoder, torch.randint(0, 30, (5, 8)), torch.randint(0, 30, (2, 6)), torch.zeros(2, 3)
    )
    assert corpus.n_docs == 5 and len(corpus.doc_vectors) == 40 and corpus.query(1).shape == (6, 4)


def test_module_trains_a_step_and_reports_coverage() -> None:
    torch.manual_seed(0)
    data = PassagePairDataModule(max_bytes=60_000, batch_size=16, n_eval_queries=3, vocab_size=400)
    module = ColbertEncoder(
        optimizer=lambda params: torch.optim.AdamW(params, lr=1e-3),
        dim=8,
        hidden=16,
        layers=1,
        heads=2,
        index={"nlist": 16, "replicas": 4},
    )
    with pytest.raises(ConfigError, match="bind_data"):
        module.training_step(next(iter(data.train_dataloader())), 0)
    module.bind_data(data.data_spec())
    optimizer = module.configure_optimizers()
    loss = module.training_step(next(iter(data.train_dataloader())), 0)
    loss.backward()
    optimizer.step()
    assert torch.isfinite(loss)
    report = module.coverage_report()
    assert set(report) == set(COVERAGE_METRICS)
    # Greedy is (1 - 1/e)-optimal, not optimal, so DISCo's set may cover a little more than greedy's: seeds
    # 0-11 give 0.992-1.0002 (seed 7 above 1; unseeded, this test failed on it once in a cold replica).
    assert 0.5 < report["coverage_ratio"] < 1.05
    assert set(module.logged_metrics()) >= {"val/recall", "test/coverage_ratio"}


def test_log_slope_recovers_a_power_law() -> None:
    assert log_slope([1e3, 1e4, 1e5], [2.0, 2.0 * 10**0.5, 2.0 * 10]) == pytest.approx(0.5)


def test_study_runs_small_and_caches_the_encoder(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("LITLAB_CACHE", str(tmp_path / "cache"))
    tiny = {"n_docs": 150, "dim": 16, "min_tokens": 3, "max_tokens": 6, "n_concepts": 32, "n_queries": 3}
    shakespeare = {
        "data": {"max_bytes": 60_000, "vocab_size": 400, "batch_size": 16, "n_eval_queries": 3, "views": 1},
        "model": {"dim": 8, "hidden": 16, "layers": 1, "heads": 2},
        "epochs": 1,
    }
    args = {
        "seeds": [0],
        "k": 4,
        "corpus": tiny,
        "index": {"nlist": 8, "replicas": 4},
        "replicas": [1, 4],
        "sizes": [100, 200],
        "size_queries": 2,
        "shakespeare": shakespeare,
    }
    out = disco_study(TaskContext.local(tmp_path / "run"), **args)
    methods = {row["method"] for row in out["tables"]["methods"].to_dict("records")}
    assert {
        "exact_greedy",
        "lazy_greedy",
        "disco",
        "disco_no_editing",
        "disco_no_lifting",
        "disco_R1",
    } <= methods
    assert out["metrics"]["exact_greedy/coverage_ratio"] == pytest.approx(1.0)
    assert "shakespeare/disco/coverage_ratio" in out["metrics"]
    assert {"coverage_vs_latency", "scaling", "replicas"} == set(out["figures"])
    assert len(out["tables"]["paper_vs_ours"]) == 8
    assert len(list((tmp_path / "cache" / "retrieval").glob("encoder-*.safetensors"))) == 1
    fits = []
    monkeypatch.setattr("litlab.fitting.Fitter.fit", lambda *a, **k: fits.append(1))
    disco_study(TaskContext.local(tmp_path / "again"), **args)
    assert not fits, "the second study read the encoder from the cache"
