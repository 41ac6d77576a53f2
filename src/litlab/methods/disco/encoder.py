"""A tiny contextual token encoder (ColBERT-style): ids -> unit token vectors, and MaxSim scoring.

Trained locally on tinyshakespeare so that the corpus DISCo indexes holds real contextual token
vectors, not Gaussian toys (no encoder weights can be downloaded here).
"""

from __future__ import annotations

import torch
from torch import nn

from litlab.datamodules.retrieval import TokenCorpus


class TokenEncoder(nn.Module):
    """Token + position embeddings, a pre-norm Transformer encoder, a linear head, unit normalisation.

    ids: (B, L) long, mask: (B, L) bool (True = real token) -> (B, L, dim) unit vectors.
    """

    def __init__(
        self,
        vocab_size: int,
        dim: int = 64,
        hidden: int = 128,
        layers: int = 2,
        heads: int = 4,
        max_length: int = 64,
        dropout: float = 0.0,
    ) -> None:
        super().__init__()
        self.tokens = nn.Embedding(vocab_size, hidden)
        self.positions = nn.Embedding(max_length, hidden)
        block = nn.TransformerEncoderLayer(
            hidden, heads, 4 * hidden, dropout, activation="gelu", batch_first=True, norm_first=True
        )
        self.encoder = nn.TransformerEncoder(block, layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(hidden)
        self.head = nn.Linear(hidden, dim)

    def forward(self, ids: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        positions = torch.arange(ids.shape[1], device=ids.device)
        h = self.tokens(ids) + self.positions(positions)
        h = self.encoder(h, src_key_padding_mask=None if mask is None else ~mask)
        return nn.functional.normalize(self.head(self.norm(h)), dim=-1)


def maxsim_matrix(queries: torch.Tensor, query_mask: torch.Tensor, passages: torch.Tensor) -> torch.Tensor:
    """S[i, j] = Σ_{t real in query i} max_u q_itᵀ p_ju: (B, Lq, d), (B, Lq), (C, L, d) -> (B, C)."""
    sims = torch.einsum("btd,cud->bctu", queries, passages).amax(-1)
    return (sims * query_mask[:, None, :]).sum(-1)


@torch.no_grad()
def encode_ids(encoder: TokenEncoder, ids: torch.Tensor, batch: int = 256) -> torch.Tensor:
    """Unit token vectors of fixed-length id rows (n, L) -> (n, L, dim), in eval mode, batched."""
    was_training = encoder.training
    encoder.eval()
    out = torch.cat([encoder(ids[i : i + batch]) for i in range(0, len(ids), batch)])
    encoder.train(was_training)
    return out


def encode_corpus(
    encoder: TokenEncoder, passages: torch.Tensor, queries: torch.Tensor, gold: torch.Tensor
) -> TokenCorpus:
    """A :class:`TokenCorpus` of encoded passages (n, L) and queries (n_q, L_q), every token kept."""
    docs = encode_ids(encoder, passages)
    query_vectors = encode_ids(encoder, queries)
    return TokenCorpus(
        doc_vectors=docs.reshape(-1, docs.shape[-1]).contiguous(),
        doc_offsets=torch.arange(len(passages) + 1) * passages.shape[1],
        query_vectors=query_vectors.reshape(-1, docs.shape[-1]).contiguous(),
        query_offsets=torch.arange(len(queries) + 1) * queries.shape[1],
        gold=gold,
    )
