"""Multi-vector retrieval corpora whose queries need a *set* of documents: planted synthetic corpora and
tinyshakespeare passages for a tiny token encoder.

- :class:`TokenCorpus`: documents and queries as ragged bags of unit token vectors (flat ``(M, d)`` rows
  with offsets) and each query's planted gold set.
- :func:`planted_corpus`: background documents mix 1–3 of ``n_concepts`` random unit concepts; each query
  is built from 3 gold documents with unequal shares of its tokens (``shares``), and ``duplicates`` noisy
  near-copies of the query's major gold document are added, so that plain MaxSim top-K fills up with
  copies of one part while the other parts stay uncovered (what collective coverage is for).
- :func:`shakespeare_passages`, :func:`planted_span_queries`, :class:`PassagePairDataModule`: token-id
  passages of tinyshakespeare, multi-passage queries made of spans of 3 held-out passages, and
  (span, passage) pairs to train an encoder contrastively. The encoder itself lives with the method
  (``litlab.methods.disco.encoder``), which turns these ids into a :class:`TokenCorpus`.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import lightning as L
import torch
from torch.utils.data import DataLoader

from litlab.core.cache import cached_tensors
from litlab.core.errors import ConfigError
from litlab.datamodules.base import TensorBatchDataset, batch_loader

# Part of every cache key: bump it whenever a generator's output changes.
RETRIEVAL_FORMAT = 1


# ------------------------------------------------------------------------------------------- corpus
@dataclass
class TokenCorpus:
    """Documents and queries as bags of unit token vectors.

    doc_vectors: (M, d) rows of all documents, document c at rows ``doc_offsets[c]:doc_offsets[c+1]``;
    query_vectors: (M_q, d) likewise with ``query_offsets``; gold: (n_queries, g) document ids, -1 pads.
    """

    doc_vectors: torch.Tensor
    doc_offsets: torch.Tensor
    query_vectors: torch.Tensor
    query_offsets: torch.Tensor
    gold: torch.Tensor

    def __post_init__(self) -> None:
        for name, vectors, offsets in (
            ("doc", self.doc_vectors, self.doc_offsets),
            ("query", self.query_vectors, self.query_offsets),
        ):
            if vectors.ndim != 2 or offsets.ndim != 1 or int(offsets[-1]) != len(vectors):
                raise ValueError(f"{name}_offsets must end at the number of {name} vectors ({len(vectors)})")
            if bool((offsets[1:] <= offsets[:-1]).any()):
                raise ValueError(f"every {name} needs at least one token vector")
        if self.gold.ndim != 2 or len(self.gold) != self.n_queries:
            raise ValueError("gold must be (n_queries, g) document ids")

    @property
    def n_docs(self) -> int:
        return len(self.doc_offsets) - 1

    @property
    def n_queries(self) -> int:
        return len(self.query_offsets) - 1

    @property
    def dim(self) -> int:
        return self.doc_vectors.shape[1]

    def query(self, i: int) -> torch.Tensor:
        """Token vectors of query ``i``: (m_i, d)."""
        return self.query_vectors[self.query_offsets[i] : self.query_offsets[i + 1]]

    def gold_set(self, i: int) -> list[int]:
        return [int(c) for c in self.gold[i] if c >= 0]

    def tensors(self) -> dict[str, torch.Tensor]:
        return {name: getattr(self, name) for name in self.__dataclass_fields__}

    @classmethod
    def from_tensors(cls, tensors: Mapping[str, torch.Tensor]) -> TokenCorpus:
        return cls(**{name: tensors[name] for name in cls.__dataclass_fields__})


def offsets_from_lengths(lengths: torch.Tensor) -> torch.Tensor:
    """(n+1,) start offsets of ragged rows of the given lengths."""
    offsets = torch.zeros(len(lengths) + 1, dtype=torch.long)
    offsets[1:] = lengths.long().cumsum(0)
    return offsets


def ragged_rows(offsets: torch.Tensor, rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Flat indices of the items of ``rows`` (ragged rows given by ``offsets``) and each item's row slot."""
    starts, lengths = offsets[rows], offsets[rows + 1] - offsets[rows]
    slot = torch.repeat_interleave(torch.arange(len(rows)), lengths)
    first = lengths.cumsum(0) - lengths
    return starts[slot] + torch.arange(len(slot)) - first[slot], slot


def _unit(x: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.normalize(x, dim=-1)


def _noisy(x: torch.Tensor, noise: float, generator: torch.Generator) -> torch.Tensor:
    """Unit vectors near ``x``: ``normalize(x + noise·ε/√d)`` (the noise has norm about ``noise``)."""
    return _unit(x + noise * torch.randn(x.shape, generator=generator) / math.sqrt(x.shape[-1]))


# ------------------------------------------------------------------------------------ planted corpus
@dataclass(frozen=True)
class PlantedConfig:
    """A synthetic multi-vector corpus with planted gold sets (the paper notes' small-scale check).

    n_docs background documents of ``min_tokens..max_tokens`` tokens; tokens are ``concept + noise``;
    n_queries queries of ``query_tokens`` tokens drawn from 3 gold documents in proportions ``shares``
    with ``query_noise``; ``duplicates`` copies of each query's major gold document with ``duplicate_noise``
    (the total corpus has n_docs + n_queries·(3 + duplicates) documents).
    """

    n_docs: int = 10_000
    dim: int = 64
    min_tokens: int = 16
    max_tokens: int = 48
    n_concepts: int = 1024
    max_concepts_per_doc: int = 3
    token_noise: float = 0.8
    n_queries: int = 64
    query_tokens: int = 24
    shares: tuple[float, float, float] = (0.5, 0.3, 0.2)
    query_noise: float = 0.3
    duplicates: int = 16
    duplicate_noise: float = 0.5
    seed: int = 0

    def __post_init__(self) -> None:
        problems = []
        if self.n_docs < 1 or self.n_queries < 1 or self.dim < 2:
            problems.append("n_docs, n_queries must be ≥ 1 and dim ≥ 2")
        if not 1 <= self.min_tokens <= self.max_tokens:
            problems.append(f"need 1 ≤ min_tokens ≤ max_tokens, got {self.min_tokens}, {self.max_tokens}")
        if len(self.shares) != 3 or min(self.shares) <= 0:
            problems.append(f"shares must be 3 positive numbers, got {list(self.shares)}")
        if self.query_tokens < 3:
            problems.append(f"query_tokens must be ≥ 3 (one per gold document), got {self.query_tokens}")
        if self.n_concepts < 3 * self.max_concepts_per_doc:
            problems.append("n_concepts must leave 3 disjoint concept sets per query")
        if self.duplicates < 0:
            problems.append(f"duplicates must be ≥ 0, got {self.duplicates}")
        if problems:
            raise ConfigError("planted corpus: " + "; ".join(problems))


def _share_counts(shares: Sequence[float], total: int) -> torch.Tensor:
    """Integer token counts per gold slot, at least 1 each, summing to ``total`` (largest remainders)."""
    weights = torch.tensor(shares, dtype=torch.float64)
    exact = weights / weights.sum() * (total - len(shares))
    counts = exact.floor().long() + 1
    remainder = total - int(counts.sum())
    counts[(exact - exact.floor()).argsort(descending=True)[:remainder]] += 1
    return counts


def build_planted_corpus(config: PlantedConfig) -> TokenCorpus:
    """Generate the corpus of ``config`` (seeded, vectorised; see :class:`PlantedConfig`)."""
    gen = torch.Generator().manual_seed(config.seed)
    c = config
    concepts = _unit(torch.randn(c.n_concepts, c.dim, generator=gen))
    # Background documents: 1..max_concepts concepts with Zipf-like popularity, each token one of them.
    popularity = 1.0 / (torch.arange(c.n_concepts, dtype=torch.float64) + 10.0)
    n_mix = torch.randint(1, c.max_concepts_per_doc + 1, (c.n_docs,), generator=gen)
    doc_concepts = torch.multinomial(popularity, c.n_docs * c.max_concepts_per_doc, True, generator=gen)
    doc_concepts = doc_concepts.view(c.n_docs, c.max_concepts_per_doc)
    lengths = torch.randint(c.min_tokens, c.max_tokens + 1, (c.n_docs,), generator=gen)
    # Gold documents: 3 per query, each with concepts disjoint from the query's other gold documents.
    n_gold = 3 * c.n_queries
    per_query = torch.rand(c.n_queries, c.n_concepts, generator=gen).argsort(1)[
        :, : 3 * c.max_concepts_per_doc
    ]
    gold_concepts = per_query.reshape(n_gold, c.max_concepts_per_doc)
    gold_mix = torch.randint(1, c.max_concepts_per_doc + 1, (n_gold,), generator=gen)
    gold_lengths = torch.randint(c.min_tokens, c.max_tokens + 1, (n_gold,), generator=gen)
    all_concepts = torch.cat([doc_concepts, gold_concepts])
    all_mix = torch.cat([n_mix, gold_mix])
    all_lengths = torch.cat([lengths, gold_lengths])
    owner = torch.repeat_interleave(torch.arange(len(all_lengths)), all_lengths)
    slot = (torch.rand(len(owner), generator=gen) * all_mix[owner]).long()
    vectors = _noisy(concepts[all_concepts[owner, slot]], c.token_noise, gen)
    offsets = offsets_from_lengths(all_lengths)
    gold_ids = torch.arange(c.n_docs, c.n_docs + n_gold).view(c.n_queries, 3)
    # Near-copies of each query's major gold document (slot 0).
    major = gold_ids[:, 0].repeat_interleave(c.duplicates)
    rows, _ = ragged_rows(offsets, major)
    dup_vectors = _noisy(vectors[rows], c.duplicate_noise, gen)
    dup_lengths = (offsets[major + 1] - offsets[major]).long()
    # Queries: counts per gold slot by ``shares``; each query token is a noisy copy of a random token
    # of its gold document.
    counts = _share_counts(c.shares, c.query_tokens)
    slot_per_token = torch.repeat_interleave(torch.arange(3), counts)
    token_gold = gold_ids[:, slot_per_token]
    start = offsets[token_gold]
    length = offsets[token_gold + 1] - start
    pick = start + (torch.rand(token_gold.shape, generator=gen) * length).long()
    query_vectors = _noisy(vectors[pick.reshape(-1)], c.query_noise, gen)
    return TokenCorpus(
        doc_vectors=torch.cat([vectors, dup_vectors]).contiguous(),
        doc_offsets=offsets_from_lengths(torch.cat([all_lengths, dup_lengths])),
        query_vectors=query_vectors.contiguous(),
        query_offsets=torch.arange(c.n_queries + 1) * c.query_tokens,
        gold=gold_ids,
    )


def planted_corpus(config: PlantedConfig | None = None, cache: bool = True, **overrides: Any) -> TokenCorpus:
    """The planted corpus of ``config`` (or of ``PlantedConfig(**overrides)``), cached as safetensors."""
    config = config or PlantedConfig(**overrides)
    if not cache:
        return build_planted_corpus(config)
    key = {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(config).items()}
    tensors = cached_tensors(
        "retrieval",
        "planted",
        str(RETRIEVAL_FORMAT),
        key,
        lambda: build_planted_corpus(config).tensors(),
    )
    return TokenCorpus.from_tensors(tensors)


# ---------------------------------------------------------------------------------- shakespeare text
@dataclass(frozen=True)
class PassageSplits:
    """Token-id passages of one text and the index ranges of the train / val / test passages."""

    passages: torch.Tensor
    train: torch.Tensor
    val: torch.Tensor
    test: torch.Tensor
    pad_id: int
    vocab_size: int


def shakespeare_passages(
    vocab_size: int = 1024,
    passage_tokens: int = 24,
    max_bytes: int | None = None,
    val_fraction: float = 0.05,
    test_fraction: float = 0.05,
    root: str | os.PathLike | None = None,
) -> PassageSplits:
    """tinyshakespeare (its first ``max_bytes`` bytes) as consecutive windows of ``passage_tokens`` BPE ids.

    The BPE (``litlab.datamodules.tokenizers.cached_bpe``) is trained on the train part only. Passages
    are split in order: train, then val, then test (neighbouring passages of a split share scenes).
    """
    from litlab.datamodules.text import text_file
    from litlab.datamodules.tokenizers import PAD_TOKEN, cached_bpe

    if passage_tokens < 4:
        raise ConfigError(f"passage_tokens must be ≥ 4, got {passage_tokens}")
    if not (val_fraction > 0 and test_fraction > 0 and val_fraction + test_fraction < 0.5):
        raise ConfigError("val_fraction and test_fraction must be positive and sum to less than 0.5")
    text = text_file("tinyshakespeare", root).read_text(encoding="utf-8")
    if max_bytes is not None:
        text = text[:max_bytes]
    train_chars = int(len(text) * (1 - val_fraction - test_fraction))
    tokenizer = cached_bpe([text[:train_chars]], vocab_size)
    ids = torch.tensor(tokenizer(text)["input_ids"], dtype=torch.long)
    n = len(ids) // passage_tokens
    if n < 20:
        raise ConfigError(f"only {n} passages of {passage_tokens} tokens; raise data.max_bytes")
    passages = ids[: n * passage_tokens].view(n, passage_tokens)
    n_val, n_test = max(1, round(n * val_fraction)), max(3, round(n * test_fraction))
    index = torch.arange(n)
    return PassageSplits(
        passages=passages,
        train=index[: n - n_val - n_test],
        val=index[n - n_val - n_test : n - n_test],
        test=index[n - n_test :],
        pad_id=int(tokenizer.convert_tokens_to_ids(PAD_TOKEN)),
        vocab_size=len(tokenizer),
    )


def planted_span_queries(
    passages: torch.Tensor, pool: torch.Tensor, n_queries: int, spans: Sequence[int], seed: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Queries made of one contiguous span from each of ``len(spans)`` distinct passages of ``pool``.

    Returns query ids ``(n_queries, sum(spans))`` (spans concatenated, longest first) and the gold
    passage ids ``(n_queries, len(spans))``.
    """
    length = passages.shape[1]
    if max(spans) > length or min(spans) < 1:
        raise ConfigError(f"spans {list(spans)} must lie in 1..passage_tokens={length}")
    if len(pool) < len(spans):
        raise ConfigError(f"{len(pool)} held-out passages cannot give {len(spans)} distinct gold passages")
    gen = torch.Generator().manual_seed(seed)
    order = torch.rand(n_queries, len(pool), generator=gen).argsort(1)[:, : len(spans)]
    gold = pool[order]
    parts = []
    for slot, span in enumerate(spans):
        start = (torch.rand(n_queries, generator=gen) * (length - span + 1)).long()
        parts.append(passages[gold[:, slot, None], start[:, None] + torch.arange(span)])
    return torch.cat(parts, dim=1), gold


def span_pairs(
    passages: torch.Tensor, index: torch.Tensor, views: int, span_range: Sequence[int], seed: int
) -> torch.Tensor:
    """``views`` random (passage, start, length) spans per passage of ``index`` as (n, 3) rows."""
    low, high = span_range
    length = passages.shape[1]
    if not 1 <= low <= high <= length:
        raise ConfigError(f"span_range {list(span_range)} must lie in 1..passage_tokens={length}")
    gen = torch.Generator().manual_seed(seed)
    rows = index.repeat_interleave(views)
    spans = torch.randint(low, high + 1, (len(rows),), generator=gen)
    starts = (torch.rand(len(rows), generator=gen) * (length - spans + 1)).long()
    return torch.stack([rows, starts, spans], dim=1)


class _PairDataset(TensorBatchDataset):
    """(span, passage) pairs gathered a batch at a time: a dict of padded query ids, mask and passage ids."""

    def __init__(self, passages: torch.Tensor, pairs: torch.Tensor, max_span: int, pad_id: int) -> None:
        super().__init__(pairs)
        self.passages, self.max_span, self.pad_id = passages, max_span, pad_id

    def __getitems__(self, indices: Sequence[int]) -> dict[str, torch.Tensor]:
        (rows,) = super().__getitems__(indices)
        passage, start, span = rows.unbind(1)
        position = start[:, None] + torch.arange(self.max_span)
        mask = torch.arange(self.max_span) < span[:, None]
        ids = self.passages[passage[:, None], position.clamp_max(self.passages.shape[1] - 1)]
        return {
            "query": ids.masked_fill(~mask, self.pad_id),
            "query_mask": mask,
            "passage": self.passages[passage],
            "passage_id": passage,
        }


class PassagePairDataModule(L.LightningDataModule):
    """(span → passage) pairs of tinyshakespeare for a contrastive token encoder, plus the coverage set.

    Train/val/test pairs come from the train/val/test passages. ``data_spec()`` gives the model the
    vocabulary, the pad id and the coverage-evaluation set: every passage (the corpus) and
    ``n_eval_queries`` planted queries over the test passages (:func:`planted_span_queries`).
    """

    def __init__(
        self,
        vocab_size: int = 1024,
        passage_tokens: int = 24,
        max_bytes: int | None = 300_000,
        span_range: Sequence[int] = (4, 12),
        views: int = 4,
        query_spans: Sequence[int] = (8, 5, 3),
        n_eval_queries: int = 32,
        batch_size: int = 64,
        root: str | None = None,
        seed: int = 0,
        num_workers: int = 0,
    ) -> None:
        super().__init__()
        if batch_size < 2:
            raise ConfigError(f"data.batch_size must be ≥ 2 (in-batch negatives), got {batch_size}")
        self.vocab_size, self.passage_tokens, self.max_bytes = vocab_size, passage_tokens, max_bytes
        self.span_range, self.views, self.query_spans = tuple(span_range), views, tuple(query_spans)
        self.n_eval_queries, self.batch_size, self.root = n_eval_queries, batch_size, root
        self.seed, self.num_workers = seed, num_workers
        self._splits: PassageSplits | None = None

    @property
    def splits(self) -> PassageSplits:
        if self._splits is None:
            self._splits = shakespeare_passages(
                self.vocab_size, self.passage_tokens, self.max_bytes, root=self.root
            )
        return self._splits

    def data_spec(self) -> dict[str, Any]:
        s = self.splits
        queries, gold = planted_span_queries(
            s.passages, s.test, self.n_eval_queries, self.query_spans, self.seed
        )
        return {
            "vocab_size": s.vocab_size,
            "pad_id": s.pad_id,
            "passage_tokens": self.passage_tokens,
            "eval_passages": s.passages,
            "eval_queries": queries,
            "eval_gold": gold,
        }

    def _loader(self, index: torch.Tensor, seed: int, shuffle: bool) -> DataLoader:
        pairs = span_pairs(self.splits.passages, index, self.views if shuffle else 1, self.span_range, seed)
        dataset = _PairDataset(self.splits.passages, pairs, self.span_range[1], self.splits.pad_id)
        return batch_loader(dataset, min(self.batch_size, len(dataset)), shuffle, seed, self.num_workers)

    def train_dataloader(self) -> DataLoader:
        return self._loader(self.splits.train, self.seed, True)

    def val_dataloader(self) -> DataLoader:
        return self._loader(self.splits.val, self.seed + 1, False)

    def test_dataloader(self) -> DataLoader:
        return self._loader(self.splits.test, self.seed + 2, False)
