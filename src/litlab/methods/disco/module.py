"""The LightningModule: a tiny ColBERT-style token encoder trained contrastively on (span, passage) pairs,
then DISCo against exact greedy on the encoded corpus at test time."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import lightning as L
import torch
from torch import nn

from litlab.core.errors import ConfigError
from litlab.methods.disco.encoder import TokenEncoder, encode_corpus, maxsim_matrix
from litlab.methods.disco.evaluate import REFERENCE, SearchSettings, evaluate, exact_methods
from litlab.methods.disco.index import DiscoIndex
from litlab.optim import OptimizerFactory

COVERAGE_METRICS = ("coverage_ratio", "jaccard", "gold_recall", "speedup", "ms_per_query")


class ColbertEncoder(L.LightningModule):
    """Contrastive MaxSim training (in-batch negatives, temperature ``temperature``) of a
    :class:`TokenEncoder`; validation/test log the loss and recall@1 of the span's passage.

    At the end of test, the data's coverage set (every passage, planted 3-passage queries) is encoded,
    indexed (``index``: DiscoIndex.build arguments; ``lifting`` the ablation flag) and searched
    (``search``: nprobe/k_tokens/pool; ``query_editing`` the ablation flag) for ``k`` documents; logged:
    ``test/coverage_ratio`` (F(DISCo)/F(exact greedy)), ``test/jaccard``, ``test/gold_recall``,
    ``test/speedup`` and ``test/ms_per_query``.
    """

    def __init__(
        self,
        optimizer: OptimizerFactory,
        dim: int = 64,
        hidden: int = 128,
        layers: int = 2,
        heads: int = 4,
        temperature: float = 0.05,
        k: int = 10,
        index: Mapping[str, Any] | None = None,
        search: Mapping[str, Any] | None = None,
        lifting: bool = True,
        query_editing: bool = True,
    ) -> None:
        super().__init__()
        if temperature <= 0:
            raise ConfigError(f"model.temperature must be positive, got {temperature}")
        self.save_hyperparameters(logger=False, ignore=["optimizer"])
        self.optimizer_factory = optimizer
        self.index_args = dict(index or {})
        self.search_settings = SearchSettings(**dict(search or {}))
        self.encoder: TokenEncoder | None = None
        self.eval_set: dict[str, torch.Tensor] = {}

    def bind_data(self, spec: Mapping[str, Any]) -> None:
        """Build the encoder for the data's vocabulary; keep the coverage set for the test stage."""
        h = self.hparams
        self.encoder = TokenEncoder(
            spec["vocab_size"], h.dim, h.hidden, h.layers, h.heads, max_length=spec["passage_tokens"]
        )
        self.eval_set = {key: spec[key] for key in ("eval_passages", "eval_queries", "eval_gold")}

    def logged_metrics(self) -> list[str]:
        names = [f"{stage}/{m}" for stage in ("train", "val", "test") for m in ("loss", "recall")]
        return names + [f"test/{m}" for m in COVERAGE_METRICS]

    def _step(self, batch: dict[str, torch.Tensor], stage: str) -> torch.Tensor:
        if self.encoder is None:
            raise ConfigError("ColbertEncoder needs bind_data(spec) before training (see litlab.contract)")
        queries = self.encoder(batch["query"], batch["query_mask"])
        passages = self.encoder(batch["passage"])
        scores = maxsim_matrix(queries, batch["query_mask"].float(), passages)
        # Same passage drawn twice in a batch is a positive too: target = first column with its id.
        same = batch["passage_id"][:, None] == batch["passage_id"][None, :]
        target = same.float().argmax(1)
        loss = nn.functional.cross_entropy(scores / self.hparams.temperature, target)
        recall = same.gather(1, scores.argmax(1, keepdim=True)).float().mean()
        size = len(scores)
        self.log(f"{stage}/loss", loss, prog_bar=stage != "train", batch_size=size)
        self.log(f"{stage}/recall", recall, prog_bar=stage != "train", batch_size=size)
        return loss

    def training_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> torch.Tensor:
        return self._step(batch, "train")

    def validation_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> None:
        self._step(batch, "val")

    def test_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> None:
        self._step(batch, "test")

    def on_test_epoch_end(self) -> None:
        for name, value in self.coverage_report().items():
            self.log(f"test/{name}", value, sync_dist=False)

    @torch.no_grad()
    def coverage_report(self) -> dict[str, float]:
        """DISCo against exact greedy on the encoded coverage set (see the class docstring)."""
        encoder = self.encoder.cpu() if self.encoder is not None else None
        if encoder is None or not self.eval_set:
            raise ConfigError("ColbertEncoder needs bind_data(spec) before testing")
        corpus = encode_corpus(
            encoder, self.eval_set["eval_passages"], self.eval_set["eval_queries"], self.eval_set["eval_gold"]
        )
        self.encoder.to(self.device)
        index = DiscoIndex.build(
            corpus.doc_vectors, corpus.doc_offsets, lifting=self.hparams.lifting, **self.index_args
        )
        k, kw = self.hparams.k, self.search_settings.kwargs()
        editing = self.hparams.query_editing
        methods = {
            REFERENCE: exact_methods(corpus, k)[REFERENCE],
            "disco": lambda i, q: index.search(q, k, query_editing=editing, **kw),
        }
        row = next(r for r in evaluate(corpus, methods) if r["method"] == "disco")
        return {name: row[name] for name in COVERAGE_METRICS}

    def configure_optimizers(self) -> Any:
        return self.optimizer_factory(params=self.parameters())
