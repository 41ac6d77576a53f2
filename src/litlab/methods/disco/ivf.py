"""The coarse quantizer of the IVF: spherical k-means and nearest-centroid assignment, by faiss or torch.

``backend="faiss"`` uses faiss-cpu (``litlab[disco]``): ``faiss.Kmeans`` and an ``IndexFlatIP``
assignment; ``backend="torch"`` is the pure-torch fallback (Lloyd iterations on a sample, blocked
matmul assignment); ``"auto"`` takes faiss when it is installed. faiss runs on as many threads as torch.
"""

from __future__ import annotations

import importlib.util
from functools import cache

import torch

from litlab.core.errors import ConfigError, LitlabError

BACKENDS = ("auto", "faiss", "torch")
FAISS_HINT = (
    "this needs the optional package 'faiss': pip install 'litlab[disco]' "
    "(or build the index with backend=torch)"
)


@cache
def faiss_available() -> bool:
    return importlib.util.find_spec("faiss") is not None


def resolve_backend(backend: str) -> str:
    """``faiss`` or ``torch`` for a requested backend; a clear error when faiss is asked for but missing."""
    if backend not in BACKENDS:
        raise ConfigError(f"backend={backend!r}; choose one of {', '.join(BACKENDS)}")
    if backend == "auto":
        return "faiss" if faiss_available() else "torch"
    if backend == "faiss" and not faiss_available():
        raise LitlabError(FAISS_HINT)
    return backend


def _faiss():
    import faiss

    faiss.omp_set_num_threads(torch.get_num_threads())
    return faiss


def _sample(x: torch.Tensor, n: int, seed: int) -> torch.Tensor:
    if len(x) <= n:
        return x
    return x[torch.randperm(len(x), generator=torch.Generator().manual_seed(seed))[:n]]


def assign(
    x: torch.Tensor, centroids: torch.Tensor, backend: str = "auto", block: int = 1 << 16
) -> torch.Tensor:
    """Index of the centroid of largest inner product for each row of x: (M, d) -> (M,) long."""
    if resolve_backend(backend) == "faiss":
        faiss = _faiss()
        index = faiss.IndexFlatIP(centroids.shape[1])
        index.add(centroids.float().contiguous().numpy())
        _, nearest = index.search(x.float().contiguous().numpy(), 1)
        return torch.from_numpy(nearest[:, 0]).long()
    c = centroids.float().T
    return torch.cat([(x[i : i + block].float() @ c).argmax(1) for i in range(0, len(x), block)])


def train_centroids(
    x: torch.Tensor,
    nlist: int,
    iters: int = 20,
    seed: int = 0,
    backend: str = "auto",
    points_per_centroid: int = 64,
) -> torch.Tensor:
    """Spherical k-means centroids (nlist, d) of unit rows x, trained on ≤ nlist·points_per_centroid rows."""
    if not 1 <= nlist <= len(x):
        raise ConfigError(f"nlist={nlist} must lie in 1..number of corpus tokens ({len(x)})")
    sample = _sample(x.float(), nlist * points_per_centroid, seed).contiguous()
    if resolve_backend(backend) == "faiss":
        faiss = _faiss()
        kmeans = faiss.Kmeans(
            x.shape[1],
            nlist,
            niter=iters,
            seed=seed,
            spherical=True,
            max_points_per_centroid=points_per_centroid,
            verbose=False,
        )
        kmeans.train(sample.numpy())
        return torch.from_numpy(kmeans.centroids.copy())
    gen = torch.Generator().manual_seed(seed)
    centroids = sample[torch.randperm(len(sample), generator=gen)[:nlist]].clone()
    for _ in range(iters):
        label = assign(sample, centroids, "torch")
        sums = torch.zeros_like(centroids).index_add_(0, label, sample)
        counts = torch.bincount(label, minlength=nlist)
        empty = counts == 0
        sums[empty] = sample[torch.randint(len(sample), (int(empty.sum()),), generator=gen)]
        centroids = torch.nn.functional.normalize(sums, dim=1)
    return centroids
