"""A pre-training data-selection pool (DATAMASK-style): documents with a quality score and a unit-norm
embedding each, built so that the two signals disagree the way they do on web data.

The pool mixes four clean domains (tinyshakespeare passages and the three procedural corpora), near-
duplicates of a few popular Shakespeare passages (mirrored pages) and noise (character spam and word
salad). Embeddings are hashed character-trigram TF-IDF vectors, randomly projected to ``embed_dim``,
centred on the pool mean and normalised. Quality is the probability of a logistic classifier trained on a
reference set that is mostly Shakespeare (the "reference corpus" of a FineWeb-Edu/DCLM-style classifier)
against fresh noise, so high-quality documents cluster in one region of embedding space.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch.utils.data import DataLoader

from litlab.core.errors import ConfigError
from litlab.datamodules.base import GlobalBatchDataModule, TensorBatchDataset, batch_loader
from litlab.datamodules.text import procedural_documents, text_file

DOMAINS = ("shakespeare", "entities", "arithmetic", "prontoqa")
KINDS = ("clean", "duplicate", "noise")
_LETTERS = "abcdefghijklmnopqrstuvwxyz      .,;:!?0123456789"


@dataclass
class SelectionPool:
    """Documents to select from, with their signals.

    ``texts`` N strings; ``domain (N,)`` index into DOMAINS (−1 for noise); ``kind (N,)`` index into KINDS;
    ``quality (N,)`` in [0, 1]; ``embeddings (N, d)`` unit rows; ``heldout`` clean documents per domain,
    never in the pool (the downstream evaluation set).
    """

    texts: list[str]
    domain: torch.Tensor
    kind: torch.Tensor
    quality: torch.Tensor
    embeddings: torch.Tensor
    heldout: dict[str, list[str]]

    def __len__(self) -> int:
        return len(self.texts)


def shakespeare_passages(chars: int = 260) -> list[str]:
    """tinyshakespeare cut at line ends into passages of about ``chars`` characters, in file order."""
    lines = text_file("tinyshakespeare").read_text(encoding="utf-8").splitlines(keepends=True)
    passages, current = [], ""
    for line in lines:
        current += line
        if len(current) >= chars:
            passages.append(current.strip())
            current = ""
    return [p for p in passages if p]


def near_duplicate(text: str, rng: random.Random, rate: float = 0.02) -> str:
    """``text`` with a fraction ``rate`` of its characters replaced (a mirrored page with small edits)."""
    chars = list(text)
    for position in rng.sample(range(len(chars)), max(1, int(rate * len(chars)))):
        chars[position] = rng.choice(_LETTERS)
    return "".join(chars)


def noise_documents(n: int, words: Sequence[str], seed: int, chars: int = 260) -> list[str]:
    """Half character spam, half word salad (real words in random order), about ``chars`` long each."""
    rng = random.Random(seed)
    docs = []
    for index in range(n):
        if index % 2:
            docs.append("".join(rng.choice(_LETTERS) for _ in range(chars)))
        else:
            docs.append(" ".join(rng.choice(words) for _ in range(chars // 6)))
    return docs


def ngram_tfidf(texts: Sequence[str]):
    """Sparse ``(N, 2^15)``: hashed character-trigram counts, sublinear TF-IDF, L2-normalised rows."""
    from sklearn.feature_extraction.text import HashingVectorizer, TfidfTransformer

    counts = HashingVectorizer(
        analyzer="char_wb", ngram_range=(3, 3), n_features=1 << 15, alternate_sign=False, norm=None
    ).transform(texts)
    return TfidfTransformer(sublinear_tf=True).fit_transform(counts)


def project_embeddings(features, embed_dim: int, seed: int) -> torch.Tensor:
    """``(N, embed_dim)`` unit rows: a seeded Gaussian projection of sparse ``features``, centred on the
    pool mean (TF-IDF vectors share one orthant) and normalised."""
    rng = np.random.default_rng(seed)
    projection = rng.standard_normal((features.shape[1], embed_dim)).astype(np.float32)
    dense = torch.from_numpy(np.asarray(features @ projection, dtype=np.float32))
    dense = dense - dense.mean(0)
    return dense / dense.norm(dim=1, keepdim=True).clamp_min(1e-8)


def make_pool(
    n_documents: int = 10_000,
    shares: Sequence[float] = (0.3, 0.45, 0.1, 0.15),
    n_popular: int = 20,
    embed_dim: int = 64,
    n_heldout: int = 100,
    seed: int = 0,
) -> SelectionPool:
    """A seeded pool: ``shares`` = (Shakespeare, procedural, near-duplicates, noise) fractions of
    ``n_documents``; the duplicates copy ``n_popular`` Shakespeare passages. ``n_heldout`` clean documents
    per domain are kept out of the pool for evaluation; the quality classifier's reference set is kept
    out of both."""
    if len(shares) != 4 or min(shares) < 0 or abs(sum(shares) - 1) > 1e-6:
        raise ConfigError(f"data.shares={list(shares)} must be 4 non-negative fractions summing to 1")
    rng = random.Random(seed)
    n_shake, n_proc, n_dup = (int(s * n_documents) for s in shares[:3])
    n_noise = n_documents - n_shake - n_proc - n_dup
    passages = shakespeare_passages()
    rng.shuffle(passages)
    n_ref = 400
    if n_shake + n_heldout + n_ref > len(passages):
        raise ConfigError(
            f"data.n_documents={n_documents} asks for {n_shake} Shakespeare passages; only "
            f"{len(passages) - n_heldout - n_ref} exist, lower n_documents or the first share"
        )
    shake, heldout_shake, reference = (
        passages[:n_shake],
        passages[n_shake : n_shake + n_heldout],
        passages[n_shake + n_heldout : n_shake + n_heldout + n_ref],
    )
    per_kind = -(-n_proc // 3)
    procedural = {
        kind: procedural_documents(kind, per_kind + n_heldout + 50, seed + 1 + i)
        for i, kind in enumerate(DOMAINS[1:])
    }
    proc_texts, proc_domain = [], []
    for i, kind in enumerate(DOMAINS[1:]):
        take = per_kind if i < 2 else n_proc - 2 * per_kind
        proc_texts += procedural[kind][:take]
        proc_domain += [i + 1] * take
    popular = shake[:n_popular] if n_popular else []
    dups = [near_duplicate(popular[i % len(popular)], rng) for i in range(n_dup)] if popular else []
    words = " ".join(shake[:500]).split()
    noise = noise_documents(n_noise, words, seed + 7)
    texts = shake + proc_texts + dups + noise
    domain = torch.tensor([0] * n_shake + proc_domain + [0] * len(dups) + [-1] * n_noise)
    kind = torch.tensor([0] * (n_shake + len(proc_texts)) + [1] * len(dups) + [2] * n_noise)
    order = torch.randperm(len(texts), generator=torch.Generator().manual_seed(seed))
    texts = [texts[i] for i in order.tolist()]
    domain, kind = domain[order], kind[order]

    # the quality classifier: reference = 80 % Shakespeare, 20 % procedural; negatives = fresh noise
    ref_proc = [procedural[k][-(50 - j)] for j in range(25) for k in DOMAINS[1:]][:100]
    positives = reference + ref_proc
    negatives = noise_documents(len(positives), words, seed + 11)
    features = ngram_tfidf(texts + positives + negatives)
    quality = quality_classifier(features[len(texts) :], len(positives), features[: len(texts)])
    heldout = {"shakespeare": heldout_shake}
    for kind_name in DOMAINS[1:]:
        heldout[kind_name] = procedural[kind_name][per_kind : per_kind + n_heldout]
    embeddings = project_embeddings(features[: len(texts)], embed_dim, seed)
    return SelectionPool(texts, domain, kind, quality, embeddings, heldout)


def quality_classifier(train_features, n_positive: int, features) -> torch.Tensor:
    """``(N,)`` the probability that each of ``features`` is "reference quality", from a logistic
    regression on ``train_features`` whose first ``n_positive`` rows are positives, the rest negatives."""
    from sklearn.linear_model import LogisticRegression

    labels = np.r_[np.ones(n_positive), np.zeros(train_features.shape[0] - n_positive)]
    classifier = LogisticRegression(C=10.0, max_iter=1000).fit(train_features, labels)
    return torch.from_numpy(classifier.predict_proba(features)[:, 1].astype(np.float32))


def mixture_pool(
    n_documents: int, embed_dim: int = 64, n_clusters: int = 50, seed: int = 0
) -> tuple[torch.Tensor, torch.Tensor]:
    """Signals of a large synthetic pool (for timing at N = 10^5..10^6, where no text is needed):
    ``quality (N,)`` and unit ``embeddings (N, d)`` from a Gaussian mixture whose cluster quality rises as
    its spread shrinks (the high-quality documents are the clustered ones), sizes drawn from a Zipf law."""
    gen = torch.Generator().manual_seed(seed)
    sizes = 1.0 / torch.arange(1, n_clusters + 1).float()
    cluster = torch.multinomial(sizes / sizes.sum(), n_documents, replacement=True, generator=gen)
    centres = torch.randn(n_clusters, embed_dim, generator=gen)
    spread = torch.rand(n_clusters, generator=gen) * 0.9 + 0.1
    noise = torch.randn(n_documents, embed_dim, generator=gen)
    embeddings = centres[cluster] + spread[cluster, None] * noise * 2
    embeddings = embeddings / embeddings.norm(dim=1, keepdim=True)
    logit = 3 * (0.55 - spread[cluster]) + 0.5 * torch.randn(n_documents, generator=gen)
    return torch.sigmoid(logit), embeddings


class SelectionDataModule(GlobalBatchDataModule):
    """The pool for a mask-learning run: ``data_spec()`` carries ``quality (N,)`` and ``embeddings (N, d)``;
    an epoch is ``steps_per_epoch`` steps, each a batch holding only its step number (the selector uses the
    whole pool every step; the pool is the data, not the batches).

    Args:
        n_documents, shares, n_popular, embed_dim, n_heldout: see ``make_pool``.
        steps_per_epoch: optimiser steps per epoch.
        seed: seeds the pool (documents, projection, shuffling).
        num_workers: loader workers (the batches are step numbers; 0 is right).
    """

    def __init__(
        self,
        n_documents: int = 10_000,
        shares: Sequence[float] = (0.3, 0.45, 0.1, 0.15),
        n_popular: int = 20,
        embed_dim: int = 64,
        n_heldout: int = 100,
        steps_per_epoch: int = 50,
        seed: int = 0,
        num_workers: int = 0,
    ) -> None:
        super().__init__(batch_size=1, num_workers=num_workers)
        if steps_per_epoch < 1:
            raise ConfigError(f"data.steps_per_epoch={steps_per_epoch} must be at least 1")
        self.save_hyperparameters(logger=False)
        self.pool_args = dict(
            n_documents=n_documents,
            shares=tuple(shares),
            n_popular=n_popular,
            embed_dim=embed_dim,
            n_heldout=n_heldout,
            seed=seed,
        )
        self.steps_per_epoch, self.seed = steps_per_epoch, seed
        self.pool: SelectionPool | None = None

    def data_spec(self) -> dict:
        """``quality`` and ``embeddings`` of the pool (built on first call)."""
        if self.pool is None:
            self.pool = make_pool(**self.pool_args)
        return {"quality": self.pool.quality, "embeddings": self.pool.embeddings}

    def setup(self, stage: str | None = None) -> None:
        self.data_spec()

    def train_dataloader(self) -> DataLoader:
        return batch_loader(
            TensorBatchDataset(torch.arange(self.steps_per_epoch)), 1, False, self.seed, self.num_workers
        )

    def val_dataloader(self) -> DataLoader:
        return batch_loader(TensorBatchDataset(torch.zeros(1)), 1, False, self.seed, 0)

    def test_dataloader(self) -> DataLoader:
        return self.val_dataloader()
