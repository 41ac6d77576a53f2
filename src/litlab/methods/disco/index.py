"""The DISCo index: R replicas of an IVF over hinge-mapped lifted token vectors, searched in K successive
probes with an edited query, persisted with a format version and a checksum.

Layout. Corpus tokens are normalised and stored once in document order (so exact rescoring reads each
document contiguously); spherical k-means (:mod:`.ivf`) assigns each to a list, and ``list_tokens``
holds every list's token ids. Replica r is the IVF of Φ_r(x̂) whose coarse centroids are the Φ_r-images
of the lifted centroids on either side of w_r: since Φ_r(x̂)ᵀ[ĉ_j; s·ĉ_j]/√2 = (xᵀc_j + 1)·[s = sign(w_rᵀx̂)],
a token falls in list (j, its side), and a query token's Φ_r-scores rank lists by qᵀc_j on the side of
Φ_r(q̂_S). Each replica thus costs one sign bit per token instead of a copy of 2(d+1)-dim vectors, and
its scores are exactly the Φ_r inner products (tested against explicit Φ vectors).

Search (per query, K rounds). Once: centroid scores, the ``nprobe`` lists per query token, qᵀx for their
tokens, and the ``k_tokens`` best tokens per (query token, replica, side) (XTR/WARP-style token
retrieval). Each round: the query state F(S, q) re-signs Φ_r(q̂_S) (query editing); a token is retrieved
for q when some replica's side matches; its Φ-score is qᵀx − F(S, q); a document's estimated gain is
Σ_q max(0, its best retrieved score) (missing tokens score 0, the hinge floor). The ``pool`` documents
of largest estimate are reranked by their exact gain (full MaxSim rows, cached per query) and the best
is added. What does not depend on S is computed once per query, not once per round: the same answers
as re-probing from scratch, at a fraction of the cost.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from litlab.core.cache import write_atomic
from litlab.core.errors import ConfigError, LitlabError
from litlab.datamodules.retrieval import offsets_from_lengths, ragged_rows
from litlab.methods.disco.ivf import assign, faiss_available, resolve_backend, train_centroids
from litlab.methods.disco.lift import agreeing, hyperplanes, lift_corpus, lift_queries, sign_codes
from litlab.methods.disco.objective import START, gains

INDEX_FORMAT = "litlab.disco-index"
INDEX_VERSION = 1
TENSORS = (
    "centroids",
    "list_offsets",
    "list_tokens",
    "vectors",
    "token_doc",
    "codes",
    "planes",
    "doc_offsets",
)


def default_nlist(n_tokens: int) -> int:
    """A power of two near 4·√M lists (PLAID takes 16·√M; fewer lists keep CPU builds short)."""
    return max(1, min(n_tokens, 2 ** round(math.log2(max(1.0, 4 * math.sqrt(n_tokens))))))


@dataclass
class Candidates:
    """What a query retrieves before any round: per query token, the T best probed tokens.

    scores: (m, T) qᵀx (−inf pads); codes: (m, T) sign codes of the tokens; in_top: (m, T) bit r set
    when the token is among the ``k_tokens`` best of its side in replica r; slot: (m, T) index
    ``doc·m + q`` into the per-query document table; docs: (n,) the candidate document ids.
    """

    scores: torch.Tensor
    codes: torch.Tensor
    in_top: torch.Tensor
    slot: torch.Tensor
    docs: torch.Tensor


@dataclass
class SearchStats:
    """How much one search looked at: candidate documents, exactly scored documents, rounds."""

    candidates: int = 0
    exact_rows: int = 0
    rounds: int = 0


class DiscoIndex:
    """DISCo's dense subset index (see the module docstring). Build with :meth:`build`, load with
    :meth:`load`; :meth:`search` returns K documents that jointly cover a multi-vector query.
    """

    def __init__(self, tensors: dict[str, torch.Tensor], config: dict[str, Any]) -> None:
        missing = set(TENSORS) - set(tensors)
        if missing:
            raise LitlabError(f"a DISCo index needs the tensors {sorted(missing)}")
        self.centroids = tensors["centroids"]
        self.list_offsets = tensors["list_offsets"]
        self.list_tokens = tensors["list_tokens"]
        self.vectors = tensors["vectors"]
        self.token_doc = tensors["token_doc"]
        self.codes = tensors["codes"]
        self.planes = tensors["planes"]
        self.doc_offsets = tensors["doc_offsets"]
        self.config = dict(config)
        self.lifted = bool(config["lifting"])
        self.replicas = self.planes.shape[0]
        self._ivf: tuple[Any, Any] | None = None
        self._largest_lists = self.list_offsets.diff().sort(descending=True).values
        if faiss_available():
            self._faiss_ivf()  # built now, so that no query pays for it

    # ------------------------------------------------------------------------------------- build
    @classmethod
    def build(
        cls,
        doc_vectors: torch.Tensor,
        doc_offsets: torch.Tensor,
        nlist: int | None = None,
        replicas: int = 8,
        lifting: bool = True,
        backend: str = "auto",
        seed: int = 0,
        kmeans_iters: int = 10,
        points_per_centroid: int = 16,
    ) -> DiscoIndex:
        """Index documents given as flat token rows (M, d) with offsets (N+1,).

        lifting=False (an ablation) draws the hyperplanes in the unlifted space, so the index cannot see
        the coverage state.
        """
        backend = resolve_backend(backend)
        x = torch.nn.functional.normalize(doc_vectors.float(), dim=-1)
        nlist = default_nlist(len(x)) if nlist is None else nlist
        centroids = train_centroids(x, nlist, kmeans_iters, seed, backend, points_per_centroid)
        label = assign(x, centroids, backend)
        lengths = doc_offsets[1:] - doc_offsets[:-1]
        planes = hyperplanes(replicas, x.shape[1] + int(lifting), seed + 1)
        tensors = {
            "centroids": centroids.float().contiguous(),
            "list_offsets": offsets_from_lengths(torch.bincount(label, minlength=nlist)),
            "list_tokens": torch.argsort(label, stable=True).int(),
            "vectors": x.contiguous(),
            "token_doc": torch.repeat_interleave(torch.arange(len(lengths), dtype=torch.int32), lengths),
            "codes": sign_codes(lift_corpus(x) if lifting else x, planes),
            "planes": planes,
            "doc_offsets": doc_offsets.long().clone(),
        }
        config = {
            "nlist": nlist,
            "replicas": replicas,
            "lifting": lifting,
            "backend": backend,
            "seed": seed,
            "kmeans_iters": kmeans_iters,
            "n_docs": len(lengths),
            "n_tokens": len(x),
            "dim": x.shape[1],
        }
        return cls(tensors, config)

    def relifted(self, lifting: bool, seed: int | None = None) -> DiscoIndex:
        """The same lists with new hyperplanes and codes, lifted or not (an ablation without new k-means)."""
        seed = self.config["seed"] if seed is None else seed
        planes = hyperplanes(self.replicas, self.vectors.shape[1] + int(lifting), seed + 1)
        codes = sign_codes(lift_corpus(self.vectors) if lifting else self.vectors, planes)
        index = DiscoIndex.__new__(DiscoIndex)
        index.__dict__.update(self.__dict__)
        index.planes, index.codes, index.lifted = planes, codes, lifting
        index.config = {**self.config, "lifting": lifting, "seed": seed}
        return index

    def tensors(self) -> dict[str, torch.Tensor]:
        return {name: getattr(self, name) for name in TENSORS}

    def nbytes(self) -> int:
        """Memory held by the index's tensors (bytes)."""
        return sum(t.numel() * t.element_size() for t in self.tensors().values())

    # ---------------------------------------------------------------------------------- retrieval
    def doc_rows(self, docs: torch.Tensor, queries: torch.Tensor) -> torch.Tensor:
        """Exact MaxSim rows (n, m) of documents ``docs`` for unit query tokens (m, d)."""
        if len(docs) == 0:
            return torch.empty(0, len(queries))
        rows, _ = ragged_rows(self.doc_offsets, docs)
        scores = self.vectors[rows] @ queries.T
        lengths = self.doc_offsets[docs + 1] - self.doc_offsets[docs]
        return torch.segment_reduce(scores, "max", lengths=lengths, axis=0)

    def _probe_torch(
        self, queries: torch.Tensor, nprobe: int, keep: int
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The ``keep`` best tokens per query token in its ``nprobe`` lists: scores, token ids (m, keep)."""
        m = len(queries)
        probe = (queries @ self.centroids.T).topk(nprobe, dim=1).indices
        starts = self.list_offsets[probe]
        sizes = (self.list_offsets[probe + 1] - starts).reshape(-1)
        segment = torch.repeat_interleave(torch.arange(len(sizes)), sizes)
        offset = torch.arange(len(segment)) - (sizes.cumsum(0) - sizes)[segment]
        position = starts.reshape(-1)[segment] + offset
        q_of = segment // nprobe
        per_q = sizes.view(m, -1).sum(1)
        column = torch.arange(len(segment)) - (per_q.cumsum(0) - per_q)[q_of]
        width = max(keep, int(per_q.max()))
        token = self.list_tokens[position].long()
        dense = torch.full((m, width), -math.inf)
        dense[q_of, column] = (self.vectors[token] * queries[q_of]).sum(1)
        where = torch.zeros((m, width), dtype=torch.long)
        where[q_of, column] = token
        scores, top = dense.topk(keep, dim=1)
        return scores, where.gather(1, top)

    def _faiss_ivf(self) -> Any:
        """A faiss IndexIVFFlat over the same lists (built on first use, never persisted)."""
        if self._ivf is None:
            import faiss

            dim = self.vectors.shape[1]
            quantizer = faiss.IndexFlatIP(dim)
            quantizer.add(self.centroids.numpy())
            ivf = faiss.IndexIVFFlat(quantizer, dim, len(self.centroids), faiss.METRIC_INNER_PRODUCT)
            ivf.is_trained = True
            sizes = self.list_offsets.diff()
            lists = torch.repeat_interleave(torch.arange(len(self.centroids)), sizes).numpy()
            ids = self.list_tokens.long()
            vectors = self.vectors[ids].numpy()
            ids = ids.numpy()
            ivf.add_core(len(vectors), faiss.swig_ptr(vectors), faiss.swig_ptr(ids), faiss.swig_ptr(lists))
            self._ivf = (ivf, quantizer)
        return self._ivf[0]

    def _probe_faiss(
        self, queries: torch.Tensor, nprobe: int, keep: int
    ) -> tuple[torch.Tensor, torch.Tensor]:
        import faiss

        ivf = self._faiss_ivf()
        faiss.omp_set_num_threads(torch.get_num_threads())
        ivf.nprobe = nprobe
        scores, position = ivf.search(queries.numpy(), keep)
        scores, position = torch.from_numpy(scores), torch.from_numpy(position)
        missing = position < 0
        return scores.masked_fill(missing, -math.inf), position.masked_fill(missing, 0)

    def candidates(
        self, queries: torch.Tensor, nprobe: int, k_tokens: int | None, prefix: int = 4, engine: str = "auto"
    ) -> Candidates:
        """Probe ``nprobe`` lists per query token and keep its best tokens (see :class:`Candidates`).

        With ``k_tokens`` set, the ``prefix·k_tokens`` best probed tokens per query token are kept and
        ranked per (replica, side); None keeps every probed token. ``engine``: ``faiss`` (IndexIVFFlat),
        ``torch`` (gather and topk) or ``auto``; both give the same tokens up to ties.
        """
        m = len(queries)
        nprobe = min(nprobe, len(self.centroids))
        cap = min(len(self.vectors), int(self._largest_lists[:nprobe].sum()))
        keep = cap if k_tokens is None else min(cap, prefix * k_tokens)
        probe = self._probe_faiss if resolve_backend(engine) == "faiss" else self._probe_torch
        scores, position = probe(queries, nprobe, keep)
        valid = scores > -math.inf
        codes = self.codes[position]
        if k_tokens is None:
            in_top = torch.where(valid, (1 << self.replicas) - 1, 0).int()
        else:
            bits = (codes[..., None] >> torch.arange(self.replicas, dtype=torch.int32)) & 1
            ones_before = bits.cumsum(1) - bits
            zeros_before = torch.arange(keep)[None, :, None] - ones_before
            rank = torch.where(bits == 1, ones_before, zeros_before)
            top_bits = ((rank < k_tokens) & valid[..., None]).int()
            in_top = (top_bits << torch.arange(self.replicas, dtype=torch.int32)).sum(-1, dtype=torch.int32)
        docs = self.token_doc[position].long()
        unique, inverse = torch.unique(docs[valid], return_inverse=True)
        slot = torch.zeros((m, keep), dtype=torch.long)
        slot[valid] = inverse * m + torch.arange(m)[:, None].expand(m, keep)[valid]
        return Candidates(scores=scores, codes=codes, in_top=in_top, slot=slot, docs=unique)

    def estimated_gains(
        self, cand: Candidates, queries: torch.Tensor, state: torch.Tensor, replicas: int | None = None
    ) -> torch.Tensor:
        """Σ_q max(0, max over retrieved tokens x of c of max_r Φ_r(q̂_S)ᵀΦ_r(x̂)) per candidate document.

        The first ``replicas`` hyperplanes are used (default all). Unlifted indexes score qᵀx instead.
        """
        return self._estimate(cand, queries, state, cand.in_top & self._replica_mask(replicas))

    def _replica_mask(self, replicas: int | None) -> int:
        r = self.replicas if replicas is None else replicas
        if not 1 <= r <= self.replicas:
            raise ConfigError(
                f"replicas={r} must lie in 1..{self.replicas} (the index was built with that many)"
            )
        return (1 << r) - 1

    def _estimate(
        self, cand: Candidates, queries: torch.Tensor, state: torch.Tensor, usable: torch.Tensor
    ) -> torch.Tensor:
        code_q = sign_codes(lift_queries(queries, state) if self.lifted else queries, self.planes)
        retrieved = agreeing(cand.codes, code_q[:, None], usable)
        value = torch.where(
            retrieved, cand.scores - state[:, None] if self.lifted else cand.scores, -math.inf
        )
        table = torch.zeros(len(cand.docs) * len(queries))
        table.scatter_reduce_(0, cand.slot.view(-1), value.view(-1), "amax", include_self=True)
        return table.view(len(cand.docs), len(queries)).sum(1)

    @torch.no_grad()
    def search(
        self,
        queries: torch.Tensor,
        k: int = 10,
        nprobe: int = 2,
        k_tokens: int | None = 16,
        pool: int = 8,
        replicas: int | None = None,
        query_editing: bool = True,
        rerank: bool = True,
        engine: str = "auto",
        eager_tokens: int = 16_384,
        stats: SearchStats | None = None,
    ) -> list[int]:
        """K documents that jointly cover ``queries`` (m, d), by K successive probes (module docstring).

        query_editing=False probes every round with the start state (ablation); rerank=False adds the
        document of largest estimated gain without exact rescoring (ablation). ``eager_tokens`` only
        decides when exact rows are computed (see below), never which documents are chosen.
        """
        if k < 1 or nprobe < 1 or pool < 1 or (k_tokens is not None and k_tokens < 1):
            raise ConfigError(
                f"k, nprobe, pool and k_tokens must be ≥ 1 (got {k}, {nprobe}, {pool}, {k_tokens})"
            )
        queries = torch.nn.functional.normalize(queries.float(), dim=-1)
        cand = self.candidates(queries, nprobe, k_tokens, engine=engine)
        n, m = len(cand.docs), len(queries)
        # Exact rows of the pooled documents, computed when first pooled; all at once when the candidates
        # hold few tokens (one gather instead of ten; the same selections either way).
        eager = int((self.doc_offsets[cand.docs + 1] - self.doc_offsets[cand.docs]).sum()) <= eager_tokens
        exact = self.doc_rows(cand.docs, queries) if eager else torch.empty(n, m)
        known = torch.full((n,), eager)
        taken = torch.zeros(n, dtype=torch.bool)
        state = torch.full((m,), START)
        start = torch.full((m,), START)
        selected = []
        usable = cand.in_top & self._replica_mask(replicas)
        for round_ in range(min(k, n)):
            estimate = self._estimate(cand, queries, state if query_editing else start, usable)
            estimate = estimate.masked_fill(taken, -math.inf)
            choice = estimate.topk(min(pool, n - round_)).indices if rerank else estimate.argmax()[None]
            if not eager:
                need = choice[~known[choice]]
                exact[need] = self.doc_rows(cand.docs[need], queries)
                known[need] = True
            best = int(choice[gains(exact[choice], state).argmax()])
            selected.append(int(cand.docs[best]))
            taken[best] = True
            state = torch.maximum(state, exact[best])
        if stats is not None:
            stats.candidates, stats.exact_rows, stats.rounds = n, int(known.sum()), len(selected)
        return selected

    @torch.no_grad()
    def maxsim_topk(
        self,
        queries: torch.Tensor,
        k: int = 10,
        nprobe: int = 2,
        k_tokens: int | None = 16,
        pool: int = 8,
        engine: str = "auto",
    ) -> list[int]:
        """PLAID-style top-K MaxSim: probe, estimate MaxSim from retrieved tokens (missing = START),
        rerank the ``max(pool, k)`` best estimates exactly, return the k largest (no coverage)."""
        queries = torch.nn.functional.normalize(queries.float(), dim=-1)
        cand = self.candidates(queries, nprobe, k_tokens, engine=engine)
        n, m = len(cand.docs), len(queries)
        table = torch.full((n * m,), START)
        table.scatter_reduce_(0, cand.slot.view(-1), cand.scores.reshape(-1), "amax", include_self=True)
        choice = table.view(n, m).sum(1).topk(min(max(pool, k), n)).indices
        exact = self.doc_rows(cand.docs[choice], queries).sum(1)
        return cand.docs[choice[exact.topk(min(k, n)).indices]].tolist()

    # -------------------------------------------------------------------------------- persistence
    def save(self, path: str | os.PathLike, overwrite: bool = False) -> Path:
        """Write the index to one safetensors file with its format, version, config and sha256."""
        from safetensors.torch import save_file

        path = Path(path)
        if path.exists() and not overwrite:
            raise LitlabError(f"{path} exists; choose another path or pass overwrite=True")
        tensors = {name: t.contiguous() for name, t in self.tensors().items()}
        metadata = {
            "format": INDEX_FORMAT,
            "version": str(INDEX_VERSION),
            "config": json.dumps(self.config, sort_keys=True),
            "sha256": checksum(tensors),
        }
        write_atomic(path, lambda tmp: save_file(tensors, tmp, metadata=metadata))
        return path

    @classmethod
    def load(cls, path: str | os.PathLike) -> DiscoIndex:
        """Read an index written by :meth:`save`; a foreign, truncated, corrupted or other-version file is
        a LitlabError, never a silently wrong index."""
        from safetensors import safe_open

        path = Path(path)
        if not path.is_file():
            raise LitlabError(f"no DISCo index at {path}")
        try:
            with safe_open(path, framework="pt") as handle:
                metadata = handle.metadata() or {}
                tensors = {name: handle.get_tensor(name) for name in handle.keys()}  # noqa: SIM118
        except Exception as error:
            raise LitlabError(
                f"{path} is not a readable DISCo index ({type(error).__name__}: truncated or not a "
                "safetensors file); rebuild it with DiscoIndex.build(...).save(path)"
            ) from error
        if metadata.get("format") != INDEX_FORMAT:
            raise LitlabError(f"{path} is not a DISCo index (format={metadata.get('format')!r})")
        if metadata.get("version") != str(INDEX_VERSION):
            raise LitlabError(
                f"{path} is a DISCo index of format version {metadata.get('version')}; this litlab reads "
                f"version {INDEX_VERSION}: rebuild the index"
            )
        if set(tensors) != set(TENSORS) or checksum(tensors) != metadata.get("sha256"):
            raise LitlabError(f"{path} is corrupted (checksum mismatch); rebuild the index")
        return cls(tensors, json.loads(metadata["config"]))


def checksum(tensors: dict[str, torch.Tensor]) -> str:
    """sha256 over every tensor's name, dtype, shape and bytes, in name order."""
    digest = hashlib.sha256()
    for name in sorted(tensors):
        tensor = tensors[name].contiguous()
        digest.update(f"{name}|{tensor.dtype}|{list(tensor.shape)}|".encode())
        digest.update(tensor.reshape(-1).view(torch.uint8).numpy().data if tensor.numel() else b"")
    return digest.hexdigest()
