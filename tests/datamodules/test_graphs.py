"""Real graphs through torch_geometric's loaders (offline copies, read-only sources), splits, cSBM."""

from __future__ import annotations

import math
import shutil
import stat
from pathlib import Path

import numpy as np
import pytest
import torch

from litlab.core import paths as data_root
from litlab.core.errors import LitlabError
from litlab.datamodules.csbm import CSBMDataModule, csbm, csbm_parameters, upper_pairs
from litlab.datamodules.graphs import GraphDataModule, evidence_unit, load_node_graph, random_class_split

SHARED = data_root.find_data("graphs", "texas/raw")


@pytest.fixture(autouse=True)
def isolated_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Processed files go to a per-session cache, never next to the (possibly read-only) raw files."""
    cache = tmp_path_factory.getbasetemp() / "litlab_cache"
    monkeypatch.setenv("LITLAB_CACHE", str(cache))
    return cache


def _is_simple_undirected(edge_index: torch.Tensor, n: int) -> bool:
    dense = torch.zeros(n, n, dtype=torch.bool)
    dense[edge_index[0], edge_index[1]] = True
    return bool((dense == dense.T).all()) and not bool(dense.diagonal().any())


def test_texas_is_simple_undirected_with_normalised_sparse_features() -> None:
    graph = load_node_graph("texas", split="random", seed=0)
    assert graph.num_nodes == 183 and graph.x.is_sparse and graph.x.shape == (183, 1703)
    assert _is_simple_undirected(graph.edge_index, 183)
    row_sums = graph.x.to_dense().sum(1)
    torch.testing.assert_close(row_sums[row_sums > 0], torch.ones(int((row_sums > 0).sum())))
    assert int(graph.y.max()) == 4


def test_read_only_source_is_staged_into_the_cache(tmp_path: Path, isolated_cache: Path) -> None:
    source = tmp_path / "graphs"
    shutil.copytree(SHARED / "cornell", source / "cornell")
    for path in [source, source / "cornell", source / "cornell" / "raw"]:
        path.chmod(stat.S_IRUSR | stat.S_IXUSR)
    try:
        graph = load_node_graph("cornell", root=source, split="geom-gcn", split_index=3)
        assert sorted(p.name for p in (source / "cornell").iterdir()) == ["raw"]  # nothing written there
        assert list(isolated_cache.rglob("cornell/processed/*.pt"))
        masks = torch.stack([graph.train_mask, graph.val_mask, graph.test_mask])
        assert bool((masks.sum(0) <= 1).all()) and int(graph.train_mask.sum()) > 80
    finally:
        for path in [source, source / "cornell", source / "cornell" / "raw"]:
            path.chmod(stat.S_IRWXU)


def test_missing_data_set_without_network_gives_one_clear_message(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv("LITLAB_DATA_ROOT", raising=False)
    monkeypatch.setattr(data_root, "shipped_data_dir", lambda family: tmp_path / "no_repo" / family)

    def offline(*args, **kwargs):
        raise OSError("network is unreachable")

    monkeypatch.setattr("torch_geometric.io.fs.cp", offline)
    with pytest.raises(LitlabError, match=r"'pubmed' is not available offline.*data\.root"):
        (tmp_path / "empty").mkdir()
        load_node_graph("pubmed", root=tmp_path / "empty")


def test_unknown_set_and_wrong_split_are_clear_errors() -> None:
    with pytest.raises(LitlabError, match="unknown graph data set 'tex'"):
        load_node_graph("tex")
    with pytest.raises(LitlabError, match="splits random, geom-gcn"):
        load_node_graph("texas", split="public")


def test_random_class_split_follows_the_spectral_gnn_protocol() -> None:
    y = torch.tensor([0] * 50 + [1] * 30 + [2] * 3 + [3] * 117)
    train, val, test = random_class_split(y, 0.1, 0.05, seed=1)  # round(0.1·200/4) = 5 per class
    assert torch.bincount(y[train], minlength=4).tolist() == [5, 5, 3, 5]  # class 2 has only 3
    assert int(val.sum()) == 10 and int(test.sum()) == 200 - 18 - 10
    assert bool((train.int() + val.int() + test.int() == 1).all())
    again = random_class_split(y, 0.1, 0.05, seed=1)
    other = random_class_split(y, 0.1, 0.05, seed=2)
    assert torch.equal(train, again[0]) and not torch.equal(train, other[0])


def test_adaspec_sparse_split_on_texas_has_one_node_per_class() -> None:
    graph = load_node_graph("texas", split="random", seed=4)
    assert torch.bincount(graph.y[graph.train_mask], minlength=5).tolist() == [1, 1, 1, 1, 1]
    assert int(graph.val_mask.sum()) == round(0.025 * 183)


def test_citeseer_public_and_geom_gcn_splits() -> None:
    public = load_node_graph("citeseer", split="public")
    assert (int(public.train_mask.sum()), int(public.val_mask.sum()), int(public.test_mask.sum())) == (
        120,
        500,
        1000,
    )
    dense = load_node_graph("citeseer", split="geom-gcn", split_index=2)
    fraction = float(dense.train_mask.float().mean())
    assert 0.45 < fraction < 0.65 and public.num_nodes == dense.num_nodes == 3327
    assert _is_simple_undirected(dense.edge_index, 3327)


def test_filtered_chameleon_and_binary_tolokers() -> None:
    chameleon = load_node_graph("chameleon", split="fixed", split_index=9)
    assert chameleon.num_nodes == 890 and _is_simple_undirected(chameleon.edge_index, 890)
    module = GraphDataModule("tolokers", split="fixed")
    assert module.metric == "roc_auc"
    module.setup("fit")
    assert module.num_classes == 2 and module.graph.num_nodes == 11758
    assert not module.graph.x.is_sparse  # continuous features stay dense


def test_datamodule_yields_the_one_graph_every_step() -> None:
    module = GraphDataModule("wisconsin", seed=0)
    module.setup("fit")
    batches = [next(iter(loader())) for loader in (module.train_dataloader, module.val_dataloader)]
    assert all(batch is module.graph for batch in batches)
    assert module.metric == "accuracy" and module.num_features == 1703


def test_upper_pairs_inverts_row_major_triangle_indexing() -> None:
    for m in (2, 3, 10, 57):
        i, j = upper_pairs(m, np.arange(m * (m - 1) // 2))
        expected_i, expected_j = np.triu_indices(m, 1)
        assert np.array_equal(i, expected_i) and np.array_equal(j, expected_j)
    m = 10**6
    i, j = upper_pairs(m, np.array([m * (m - 1) // 2 - 1, 123_456_789_012]))
    assert (i[0], j[0]) == (m - 2, m - 1)
    start = i[1] * (2 * m - i[1] - 1) // 2
    assert start + j[1] - i[1] - 1 == 123_456_789_012


@pytest.mark.parametrize("phi", [-0.75, 0.0, 0.75])
def test_csbm_edge_and_feature_statistics(phi: float) -> None:
    n, p, d, eps = 3000, 400, 5.0, 3.25
    graph = csbm(n, p, d, eps, phi, seed=3)
    lam, mu = csbm_parameters(phi, n, p, eps)
    degree = graph.edge_index.size(1) / n
    assert abs(degree - d) < 0.35  # expected degree d (both directions counted)
    same = float((graph.y[graph.edge_index[0]] == graph.y[graph.edge_index[1]]).float().mean())
    assert abs(same - (d + math.sqrt(d) * lam) / (2 * d)) < 0.04  # homophily set by Λ
    sign = 1.0 - 2.0 * graph.y.double()  # class 0 is v = +1
    direction = (sign[:, None] * graph.x.double()).mean(0)  # √(μ/n)·u + noise: n‖·‖² ≈ μ‖u‖² + 1
    assert abs(n * float(direction.square().sum()) - (mu + 1)) < 0.25 * (mu + 1)
    assert torch.equal(csbm(n, p, d, eps, phi, seed=3).edge_index, graph.edge_index)


def test_csbm_twins_share_neighbours_label_and_not_features() -> None:
    graph = csbm(400, 60, phi=-0.5, seed=1, twins_fraction=0.25)
    assert graph.num_nodes == 500
    dense = torch.zeros(500, 500, dtype=torch.bool)
    dense[graph.edge_index[0], graph.edge_index[1]] = True
    twins = torch.arange(400, 500)
    originals = graph.twin_of[400:]
    assert torch.equal(dense[twins][:, :400], dense[originals][:, :400])
    assert torch.equal(graph.y[twins], graph.y[originals])
    assert not torch.allclose(graph.x[twins], graph.x[originals])
    assert bool((graph.twin_of[:400] == -1).all())


def test_csbm_datamodule_split() -> None:
    module = CSBMDataModule(n=400, p=50, seed=2)
    module.setup("fit")
    graph = module.graph
    assert torch.bincount(graph.y[graph.train_mask]).tolist() == [5, 5] and int(graph.val_mask.sum()) == 10


def test_texas_and_cornell_share_features_and_labels_so_they_are_one_evidence_unit() -> None:
    """Geom-GCN's release ships Texas and Cornell with byte-identical feature/label files (only the edges
    differ), so AdaSpec's pooled statistics must count them once."""
    root = data_root.find_data("graphs", "cornell/raw")
    assert SHARED is not None and root is not None
    texas, cornell = SHARED / "texas" / "raw", root / "cornell" / "raw"
    name = "out1_node_feature_label.txt"
    assert (texas / name).read_bytes() == (cornell / name).read_bytes()
    assert (texas / "out1_graph_edges.txt").read_bytes() != (cornell / "out1_graph_edges.txt").read_bytes()
    assert evidence_unit("texas") == evidence_unit("cornell") != evidence_unit("wisconsin")
