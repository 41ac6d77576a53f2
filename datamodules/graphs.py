"""Real graphs for full-batch node classification, loaded with torch_geometric's loaders.

Raw files are looked up in ``data.root``, ``$LITLAB_DATA_ROOT/graphs`` and the shipped ``data/graphs``
(see ``litlab.core.paths``). Found files are symlinked into a writable cache
(``$LITLAB_CACHE/graphs/<hash>``) and processed there, so a read-only data folder works; when no copy
exists the loader's own download runs into ``root`` and a failure ends in one message that says where
the files should go.

Every graph is made undirected and simple (WebKB and the filtered Wikipedia sets are directed in their
files; spectral filters need a symmetric matrix). Splits are boolean masks:

- ``random``: the spectral-GNN protocol (GPRGNN, BernNet, AdaSpec): ``round(train_rate·n/C)`` training
  nodes per class (at least one), ``round(val_rate·n)`` validation nodes from the rest, the rest test.
  AdaSpec uses 2.5/2.5/95.
- ``geom-gcn``: the 60/20/20 split files of Geom-GCN (Cora, CiteSeer, PubMed, WebKB, Actor).
- ``public``: the Planetoid split (Cora, CiteSeer, PubMed).
- ``fixed``: the split files shipped with the heterophilous benchmarks and the filtered Wikipedia sets.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import lightning as L
import numpy as np
import torch
from torch.utils.data import DataLoader
from torch_geometric.data import Data, InMemoryDataset, download_url
from torch_geometric.utils import coalesce, remove_self_loops, to_undirected

from litlab.core.errors import LitlabError
from litlab.core.paths import cache_dir, data_root_candidates, find_data

Split = Literal["random", "geom-gcn", "public", "fixed"]
FAMILY = "graphs"
SPARSE_DENSITY = 0.1
HETEROPHILOUS_URL = "https://github.com/yandex-research/heterophilous-graphs/raw/main/data"


class FilteredWikipedia(InMemoryDataset):
    """Chameleon or Squirrel with duplicate nodes removed (Platonov et al. 2023): 890 / 2,223 nodes.

    Reads ``<root>/filtered/<name>_filtered_directed.npz`` (downloaded from the heterophilous-graphs
    repository when absent); keeps the 10 fixed splits as ``(n, 10)`` masks.
    """

    def __init__(self, root: str, name: str) -> None:
        self.name = name.lower()
        if self.name not in ("chameleon", "squirrel"):
            raise ValueError(f"FilteredWikipedia has chameleon and squirrel, not {name!r}")
        super().__init__(root)
        self.load(self.processed_paths[0])

    @property
    def raw_dir(self) -> str:
        return os.path.join(self.root, "filtered")

    @property
    def processed_dir(self) -> str:
        return os.path.join(self.root, "filtered", f"processed_{self.name}")

    @property
    def raw_file_names(self) -> str:
        return f"{self.name}_filtered_directed.npz"

    @property
    def processed_file_names(self) -> str:
        return "data.pt"

    def download(self) -> None:
        download_url(f"{HETEROPHILOUS_URL}/{self.raw_file_names}", self.raw_dir)

    def process(self) -> None:
        raw = np.load(self.raw_paths[0])
        data = Data(
            x=torch.from_numpy(raw["node_features"]).float(),
            y=torch.from_numpy(raw["node_labels"]).long(),
            edge_index=torch.from_numpy(raw["edges"]).t().contiguous(),
            train_mask=torch.from_numpy(raw["train_masks"]).t().contiguous(),
            val_mask=torch.from_numpy(raw["val_masks"]).t().contiguous(),
            test_mask=torch.from_numpy(raw["test_masks"]).t().contiguous(),
        )
        self.save([data], self.processed_paths[0])


@dataclass(frozen=True)
class GraphSet:
    """One data set: its torch_geometric loader, the name the loader takes, where its raw files lie
    (relative to a graphs root), which file splits it has, and whether its features are bag-of-words."""

    loader: str
    name: str
    source: str
    file_splits: tuple[str, ...]
    bag_of_words: bool = True
    binary: bool = False
    # Sets whose feature and label files are byte-identical share a group: they differ only in their
    # edges, so results on them are not independent evidence (Cornell and Texas, upstream in Geom-GCN too).
    feature_group: str | None = None

    @property
    def metric(self) -> str:
        """``roc_auc`` for the binary sets the literature scores by ROC-AUC, else ``accuracy``."""
        return "roc_auc" if self.binary else "accuracy"

    def staged_dirs(self, split: str) -> list[str]:
        """Folders, relative to the loader root, where the loader expects the source files."""
        source_dir = str(Path(self.source).parent) if self.source.endswith(".npz") else self.source
        if self.loader == "planetoid" and split == "geom-gcn":
            return [f"{self.name}/geom-gcn/raw"]
        return [source_dir]

    def load(self, root: Path, split: str) -> Data:
        """Run the torch_geometric loader on ``root`` (processing or downloading as it needs)."""
        from torch_geometric import datasets

        root_str = str(root)
        if self.loader == "planetoid":
            return datasets.Planetoid(
                root_str, self.name, split="geom-gcn" if split == "geom-gcn" else "public"
            )[0]
        if self.loader == "webkb":
            return datasets.WebKB(root_str, self.name)[0]
        if self.loader == "actor":
            return datasets.Actor(str(root / "Actor"))[0]
        if self.loader == "heterophilous":
            return datasets.HeterophilousGraphDataset(root_str, self.name)[0]
        if self.loader == "filtered":
            return FilteredWikipedia(root_str, self.name)[0]
        if self.loader == "amazon":
            return datasets.Amazon(root_str, self.name)[0]
        if self.loader == "coauthor":
            return datasets.Coauthor(root_str, self.name)[0]
        raise ValueError(f"unknown loader {self.loader!r}")


def _webkb(name: str, feature_group: str | None = None) -> GraphSet:
    return GraphSet("webkb", name, f"{name}/raw", ("geom-gcn",), feature_group=feature_group)


def _heterophilous(name: str, binary: bool) -> GraphSet:
    return GraphSet("heterophilous", name, f"{name}/raw", ("fixed",), bag_of_words=False, binary=binary)


GRAPH_SETS: dict[str, GraphSet] = {
    "cora": GraphSet("planetoid", "Cora", "Cora/raw", ("public", "geom-gcn")),
    "citeseer": GraphSet("planetoid", "CiteSeer", "CiteSeer/raw", ("public", "geom-gcn")),
    "pubmed": GraphSet("planetoid", "PubMed", "PubMed/raw", ("public", "geom-gcn")),
    "texas": _webkb("texas", feature_group="texas+cornell"),
    "wisconsin": _webkb("wisconsin"),
    "cornell": _webkb("cornell", feature_group="texas+cornell"),
    "actor": GraphSet("actor", "Actor", "Actor/raw", ("geom-gcn",)),
    "chameleon": GraphSet("filtered", "chameleon", "filtered/chameleon_filtered_directed.npz", ("fixed",)),
    "squirrel": GraphSet("filtered", "squirrel", "filtered/squirrel_filtered_directed.npz", ("fixed",)),
    "roman_empire": _heterophilous("roman_empire", binary=False),
    "amazon_ratings": _heterophilous("amazon_ratings", binary=False),
    "minesweeper": _heterophilous("minesweeper", binary=True),
    "tolokers": _heterophilous("tolokers", binary=True),
    "questions": _heterophilous("questions", binary=True),
    "computers": GraphSet("amazon", "Computers", "Computers/raw", ()),
    "photo": GraphSet("amazon", "Photo", "Photo/raw", ()),
    "coauthor_cs": GraphSet("coauthor", "CS", "CS/raw", ()),
    "coauthor_physics": GraphSet("coauthor", "Physics", "Physics/raw", ()),
}


def graph_set(name: str) -> GraphSet:
    """The ``GraphSet`` called ``name`` (case and ``-`` insensitive), or a LitlabError listing them."""
    key = name.lower().replace("-", "_")
    if key not in GRAPH_SETS:
        raise LitlabError(f"unknown graph data set {name!r}; choose one of: {', '.join(GRAPH_SETS)}")
    return GRAPH_SETS[key]


def evidence_unit(name: str) -> str:
    """The independent unit a data set belongs to: its ``feature_group`` (Texas and Cornell share one:
    the same features and labels, different edges), else its own name."""
    spec = graph_set(name)
    return spec.feature_group or name.lower().replace("-", "_")


def _stage(spec: GraphSet, source_root: Path, split: str) -> Path:
    """Symlink the raw files of ``spec`` from ``source_root`` into a writable cache; return its root."""
    source = source_root / spec.source
    files = [source] if source.is_file() else sorted(p for p in source.iterdir() if p.is_file())
    staged_root = cache_dir(FAMILY, source_root)
    for relative in spec.staged_dirs(split):
        target_dir = staged_root / relative
        target_dir.mkdir(parents=True, exist_ok=True)
        for file in files:
            link = target_dir / file.name
            if link.is_symlink() and link.resolve() != file.resolve():
                link.unlink()
            if not link.exists():
                link.symlink_to(file.resolve())
    return staged_root


def load_graph_set(name: str, root: str | os.PathLike | None = None, split: str = "random") -> Data:
    """The raw ``Data`` of a data set as its loader returns it (possibly directed, file masks kept).

    Uses the first local copy among ``data_root_candidates('graphs', root)``; otherwise downloads into
    ``root`` (or the cache when no root is given) and turns a failure into one clear LitlabError.
    """
    spec = graph_set(name)
    found = find_data(FAMILY, spec.source, root)
    if found is not None:
        return spec.load(_stage(spec, found, split), split)
    target = Path(root).expanduser() if root is not None else cache_dir(FAMILY)
    try:
        return spec.load(target, split)
    except Exception as error:
        looked = ", ".join(str(c / spec.source) for c in data_root_candidates(FAMILY, root))
        raise LitlabError(
            f"graph data set {name!r} is not available offline and could not be downloaded into {target} "
            f"({type(error).__name__}: {error}). Looked for its raw files in: {looked}. Put the raw files "
            "there, set data.root=<folder laid out like litlab's data/graphs>, or export "
            "LITLAB_DATA_ROOT=<folder with a graphs/ subfolder>; with a network the loader downloads them."
        ) from error


def simple_undirected(edge_index: torch.Tensor, num_nodes: int) -> torch.Tensor:
    """Symmetrise, drop self-loops and sort (row-major) an edge list: ``(2, E) -> (2, E')``."""
    edge_index, _ = remove_self_loops(edge_index)
    return coalesce(to_undirected(edge_index, num_nodes=num_nodes), num_nodes=num_nodes)


def row_normalize(x: torch.Tensor) -> torch.Tensor:
    """Rows scaled to sum 1 (zero rows stay zero), as GPRGNN/BernNet preprocess bag-of-words features."""
    return x / x.sum(dim=1, keepdim=True).clamp_min(1e-12)


def random_class_split(
    y: torch.Tensor, train_rate: float, val_rate: float, seed: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The spectral-GNN random split: ``round(train_rate·n/C)`` (≥ 1) training nodes per class, then
    ``round(val_rate·n)`` validation nodes from the rest, the rest test. ``y: (n,)`` -> three ``(n,)``
    boolean masks. A class with fewer nodes gives all of them to training."""
    n = y.numel()
    num_classes = int(y.max()) + 1
    per_class = max(1, round(train_rate * n / num_classes))
    n_val = round(val_rate * n)
    generator = torch.Generator().manual_seed(seed)
    perm = torch.randperm(n, generator=generator)
    grouped = perm[torch.argsort(y[perm], stable=True)]
    counts = torch.bincount(y, minlength=num_classes)
    starts = torch.cumsum(counts, 0) - counts
    rank_in_class = torch.arange(n) - starts[y[grouped]]
    train = torch.zeros(n, dtype=torch.bool)
    train[grouped[rank_in_class < per_class]] = True
    rest = perm[~train[perm]]
    val = torch.zeros(n, dtype=torch.bool)
    val[rest[:n_val]] = True
    test = ~(train | val)
    return train, val, test


def _file_masks(data: Data, split_index: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    masks = []
    for key in ("train_mask", "val_mask", "test_mask"):
        mask = data[key]
        if mask.dim() == 2:
            if not 0 <= split_index < mask.size(1):
                raise LitlabError(
                    f"split_index={split_index} is out of range; this set has {mask.size(1)} splits"
                )
            mask = mask[:, split_index]
        masks.append(mask.bool())
    return masks[0], masks[1], masks[2]


def load_node_graph(
    name: str,
    root: str | os.PathLike | None = None,
    split: Split = "random",
    train_rate: float = 0.025,
    val_rate: float = 0.025,
    split_index: int = 0,
    seed: int = 0,
    normalize_features: bool = True,
    sparse_features: bool = True,
) -> Data:
    """A data set as one simple undirected graph with ``x (n, h)``, ``y (n,)`` and the split's masks.

    ``seed`` draws the random split; ``split_index`` picks one of the file splits. With
    ``sparse_features``, features with under ``SPARSE_DENSITY`` nonzeros are a sparse COO tensor.
    """
    spec = graph_set(name)
    allowed = ("random", *spec.file_splits)
    if split not in allowed:
        raise LitlabError(f"data set {name!r} has splits {', '.join(allowed)}; got split={split!r}")
    raw = load_graph_set(name, root, split)
    x = raw.x.float()
    if normalize_features and spec.bag_of_words:
        x = row_normalize(x)
    if sparse_features and x.count_nonzero() < SPARSE_DENSITY * x.numel():
        x = x.to_sparse()
    y = raw.y.long()
    if split == "random":
        train, val, test = random_class_split(y, train_rate, val_rate, seed)
    else:
        train, val, test = _file_masks(raw, split_index)
    return Data(
        x=x,
        y=y,
        edge_index=simple_undirected(raw.edge_index, x.size(0)),
        train_mask=train,
        val_mask=val,
        test_mask=test,
        num_nodes=x.size(0),
    )


def node_data_spec(graph: Data, metric: str) -> dict[str, Any]:
    """What a node classifier may know of ``graph`` before training (``litlab.contract``): its edges, its
    input features (transductive models build per-node and per-edge parameters from them, e.g. AdaSpec's
    b and Ω_F), the number of classes and the metric. Labels and masks are not part of it."""
    return {
        "edge_index": graph.edge_index,
        "features": graph.x,
        "num_nodes": graph.num_nodes,
        "num_classes": int(graph.y.max()) + 1,
        "metric": metric,
    }


def _single(items: list[Data]) -> Data:
    return items[0]


class NodeDataModule(L.LightningDataModule):
    """Full-batch node classification: every loader yields the one graph; splits are its masks.

    Subclasses set ``self.graph`` (a ``Data`` with ``x, y, edge_index, train_mask, val_mask, test_mask``)
    in ``setup``. ``metric`` is ``roc_auc`` for binary sets that the literature scores by ROC-AUC,
    else ``accuracy``. Under DDP every process gets the whole graph.
    """

    binary_metric_roc_auc: bool = False

    def __init__(self, num_workers: int = 0) -> None:
        super().__init__()
        self.graph: Data | None = None
        self.num_workers = num_workers

    @property
    def metric(self) -> str:
        return "roc_auc" if self.binary_metric_roc_auc else "accuracy"

    @property
    def num_features(self) -> int:
        return self._require_graph().x.size(1)

    @property
    def num_classes(self) -> int:
        return int(self._require_graph().y.max()) + 1

    def data_spec(self) -> dict[str, Any]:
        """``node_data_spec`` of the graph (loading it; ``setup`` then reuses it)."""
        return node_data_spec(self._require_graph(), self.metric)

    def _require_graph(self) -> Data:
        if self.graph is None:
            self.setup("fit")
        assert self.graph is not None
        return self.graph

    def _loader(self) -> DataLoader:
        return DataLoader(
            [self._require_graph()], batch_size=1, collate_fn=_single, num_workers=self.num_workers
        )

    def train_dataloader(self) -> DataLoader:
        return self._loader()

    def val_dataloader(self) -> DataLoader:
        return self._loader()

    def test_dataloader(self) -> DataLoader:
        return self._loader()


class GraphDataModule(NodeDataModule):
    """A real graph from ``GRAPH_SETS`` (see ``load_node_graph`` for the arguments; ``num_workers`` is
    the loader's, 0 being best for one in-memory graph)."""

    def __init__(
        self,
        name: str,
        root: str | None = None,
        split: Split = "random",
        train_rate: float = 0.025,
        val_rate: float = 0.025,
        split_index: int = 0,
        seed: int = 0,
        normalize_features: bool = True,
        sparse_features: bool = True,
        num_workers: int = 0,
    ) -> None:
        super().__init__(num_workers)
        self.spec = graph_set(name)
        self.binary_metric_roc_auc = self.spec.binary
        self.kwargs = dict(
            name=name,
            root=root,
            split=split,
            train_rate=train_rate,
            val_rate=val_rate,
            split_index=split_index,
            seed=seed,
            normalize_features=normalize_features,
            sparse_features=sparse_features,
        )

    def prepare_data(self) -> None:
        load_graph_set(self.kwargs["name"], self.kwargs["root"], self.kwargs["split"])

    def setup(self, stage: str | None = None) -> None:
        if self.graph is None:
            self.graph = load_node_graph(**self.kwargs)
