"""Node distinguishability (AdaSpec, Section 4): distinct eigenvalues, nonzero frequency components, and
the Theorem 4.3 lower bound ``min(d_M, ‖UᵀX‖₀)``, by dense eigendecomposition (analysis only).

A graph matrix is block diagonal over connected components, so each component is decomposed alone
(exact, and much cheaper than one n × n eigendecomposition); eigenvalues of all blocks are then merged.

Counting with a tolerance: sorted eigenvalues whose gap is at most ``tol`` form one cluster (one
distinct eigenvalue). ``‖UᵀX‖₀`` depends on the basis chosen inside a repeated eigenspace, so we count
``Σ_λ rank(U_λᵀ X)``: the number of nonzero frequency rows in the best-aligned eigenbasis. It equals
``‖UᵀX‖₀`` when the spectrum is simple (Theorem 5.2's setting).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

import matplotlib.pyplot as plt
import numpy as np
import torch
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components
from torch_geometric.data import Data

from litlab.core.errors import LitlabError
from litlab.core.progress import track
from litlab.core.results import TaskOutput
from litlab.datamodules.graphs import graph_set, load_node_graph, node_data_spec
from litlab.methods.adaspec.matrix import (
    AdaSpecMatrix,
    feature_edge_weights,
    initial_b,
    node_degree,
    omega,
    omega_d,
)
from litlab.methods.adaspec.module import NodeClassifier
from litlab.methods.adaspec.training import fit_node_classifier
from litlab.task import TaskContext

log = logging.getLogger("litlab")


@dataclass(frozen=True)
class Distinguishability:
    """``distinct``: d_M; ``frequencies``: Σ_λ rank(U_λᵀX); ``bound``: min of the two (Theorem 4.3)."""

    nodes: int
    distinct: int
    frequencies: int
    bound: int


def eigen_clusters(eigenvalues: np.ndarray, tol: float) -> np.ndarray:
    """Cluster id of each eigenvalue (any order): neighbours in sorted order with gap ≤ tol share one."""
    order = np.argsort(eigenvalues)
    ids_sorted = np.concatenate([[0], np.cumsum(np.diff(eigenvalues[order]) > tol)])
    ids = np.empty_like(ids_sorted)
    ids[order] = ids_sorted
    return ids


def distinct_eigenvalues(eigenvalues: np.ndarray, tol: float = 1e-8) -> int:
    """Number of distinct eigenvalues up to ``tol`` (gap clustering of the sorted values)."""
    return int(eigen_clusters(np.asarray(eigenvalues), tol).max()) + 1 if len(eigenvalues) else 0


def frequency_components(
    eigenvalues: np.ndarray, projections: np.ndarray, tol: float = 1e-8, rank_tol: float = 1e-8
) -> int:
    """``Σ_λ rank(U_λᵀ X)`` from ``projections = UᵀX (n, h)`` (row i for ``eigenvalues[i]``).

    A singular value counts if it exceeds ``rank_tol·‖X‖_F`` (``‖UᵀX‖_F = ‖X‖_F``).
    """
    threshold = rank_tol * max(np.linalg.norm(projections), 1e-300)
    ids = eigen_clusters(eigenvalues, tol)
    order = np.argsort(ids, kind="stable")
    boundaries = np.flatnonzero(np.diff(ids[order])) + 1
    total = 0
    for rows in np.split(order, boundaries):
        block = projections[rows]
        if len(rows) == 1:
            total += int(np.linalg.norm(block) > threshold)
        else:
            total += int((np.linalg.svd(block, compute_uv=False) > threshold).sum())
    return total


def dense_blocks(
    edge_index: torch.Tensor, weight: torch.Tensor, diagonal: torch.Tensor, max_block: int = 5000
) -> list[tuple[np.ndarray, np.ndarray]]:
    """``(nodes, dense block)`` of ``W + diag(c)`` per connected component, float64.

    Raises a LitlabError if a component is larger than ``max_block`` nodes (dense analysis too costly).
    """
    n = diagonal.numel()
    row, col = edge_index.cpu().numpy()
    values = weight.detach().double().cpu().numpy()
    sparse = coo_matrix((values, (row, col)), shape=(n, n)).tocsr()
    _, labels = connected_components(sparse, directed=False)
    diag = diagonal.detach().double().cpu().numpy()
    order = np.argsort(labels, kind="stable")
    groups = np.split(order, np.flatnonzero(np.diff(labels[order])) + 1)
    largest = max(len(g) for g in groups)
    if largest > max_block:
        raise LitlabError(
            f"a connected component has {largest} nodes; dense eigen-analysis is limited to "
            f"max_block={max_block}. Raise task.max_block (memory ~ 8·n² bytes) or pick a smaller graph."
        )
    blocks = []
    for nodes in groups:
        block = sparse[nodes][:, nodes].toarray()
        block[np.diag_indices_from(block)] += diag[nodes]
        blocks.append((nodes, block))
    return blocks


def analyse_matrix(
    edge_index: torch.Tensor,
    weight: torch.Tensor,
    diagonal: torch.Tensor,
    features: torch.Tensor | None = None,
    tol: float = 1e-8,
    rank_tol: float = 1e-8,
    max_block: int = 5000,
) -> tuple[Distinguishability, np.ndarray]:
    """Distinguishability of ``S = W + diag(c)`` (symmetric) for ``features (n, h)``, and S's eigenvalues.

    Without features only eigenvalues are computed (``frequencies`` is then −1).
    """
    blocks = dense_blocks(edge_index, weight, diagonal, max_block)
    x = (
        None
        if features is None
        else (features.to_dense() if features.is_sparse else features).double().numpy()
    )
    eigenvalues, projections = [], []
    for nodes, block in blocks:
        if x is None:
            eigenvalues.append(torch.linalg.eigvalsh(torch.from_numpy(block)).numpy())
        else:
            values, vectors = (t.numpy() for t in torch.linalg.eigh(torch.from_numpy(block)))
            eigenvalues.append(values)
            projections.append(vectors.T @ x[nodes])
    spectrum = np.concatenate(eigenvalues)
    distinct = distinct_eigenvalues(spectrum, tol)
    frequencies = (
        -1 if x is None else frequency_components(spectrum, np.concatenate(projections), tol, rank_tol)
    )
    bound = distinct if x is None else min(distinct, frequencies)
    return Distinguishability(diagonal.numel(), distinct, frequencies, bound), spectrum


def graph_matrices(
    graph: Data, matrix: AdaSpecMatrix, trained_b: torch.Tensor | None = None
) -> dict[str, tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    """The matrices compared, as ``(edge_index, weight, diagonal)`` in float64: Ã with and without
    self-loops (the bases' own), Ω_D and Ω at AdaSpec's initial b, and Ω at a trained b if given."""
    edge_index = matrix.edge_index.cpu()
    n = graph.num_nodes
    degree = node_degree(edge_index, n, torch.float64)
    features = (graph.x.to_dense() if graph.x.is_sparse else graph.x).double()
    feature_weight = feature_edge_weights(features, edge_index)
    b0 = initial_b(degree, matrix.b_init)
    ones = torch.ones(n, dtype=torch.float64)
    matrices = {
        "A_tilde_self_loops": (edge_index, *omega_d(edge_index, degree, ones)),
        "A_tilde": (edge_index, *omega_d(edge_index, degree, 0 * ones)),
        "Omega_D": (edge_index, *omega_d(edge_index, degree, b0)),
        "Omega": (edge_index, *omega(edge_index, degree, b0, feature_weight, matrix.alpha1, matrix.alpha2)),
    }
    if trained_b is not None:
        b = trained_b.detach().double().cpu()
        matrices["Omega_trained"] = (
            edge_index,
            *omega(edge_index, degree, b, feature_weight, matrix.alpha1, matrix.alpha2),
        )
    return matrices


def spectrum_figure(spectra: dict[str, np.ndarray], title: str):
    """Eigenvalue histograms of each matrix, one panel per matrix (shared bins)."""
    fig, axes = plt.subplots(len(spectra), 1, figsize=(7, 1.8 * len(spectra)), sharex=True)
    axes = np.atleast_1d(axes)
    low = min(s.min() for s in spectra.values())
    high = max(s.max() for s in spectra.values())
    bins = np.linspace(low, high, 121)
    for ax, (name, spectrum) in zip(axes, spectra.items()):
        ax.hist(spectrum, bins=bins, color="tab:blue")
        ax.set_ylabel(name, rotation=0, ha="right", fontsize=8)
        ax.set_yscale("log")
    axes[-1].set_xlabel("eigenvalue")
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def distinguishability_task(
    ctx: TaskContext,
    model: Callable[[], NodeClassifier],
    datasets: Sequence[str],
    root: str | None = None,
    tolerance: float = 1e-8,
    rank_tolerance: float = 1e-8,
    train_epochs: int = 1000,
    patience: int = 200,
    seed: int = 0,
    max_block: int = 5000,
) -> TaskOutput:
    """``litlab-run task=adaspec/distinguishability``: for each data set, d_M, Σ_λ rank(U_λᵀX) and the
    Theorem 4.3 bound of Ã (with and without self-loops), Ω_D and Ω at the initial b, and Ω with the b
    of a model trained through ``ctx.fitter`` (``train_epochs`` > 0) on AdaSpec's random split ``seed``.
    Returns the table ``distinguishability`` and the figures ``eigenvalues_<set>``. One CPU thread unless
    ``extras.torch_threads`` says otherwise, as in ``study.study``."""
    ctx.pin_threads(1)
    rows, results, figures = [], {}, {}
    for dataset in track(datasets, description="distinguishability"):
        graph = load_node_graph(dataset, root, "random", seed=seed)
        metric = graph_set(dataset).metric
        module = model()
        module.bind_data(node_data_spec(graph, metric))
        if not isinstance(module.bound_network.matrix, AdaSpecMatrix):
            raise LitlabError("task.model must be an AdaSpec model (model=adaspec/<base>_adaspec)")
        trained_b = None
        if train_epochs > 0:
            fit = fit_node_classifier(ctx.fitter, module, graph, metric, train_epochs, patience, seed)
            trained_b = module.bound_network.matrix.b.detach().cpu()
            log.info("%s: trained AdaSpec model, test %s %.4f", dataset, metric, fit.test_score)
        spectra = {}
        matrices = graph_matrices(graph, module.bound_network.matrix, trained_b)
        for name, (edge_index, weight, diagonal) in matrices.items():
            stats, spectrum = analyse_matrix(
                edge_index, weight, diagonal, graph.x, tolerance, rank_tolerance, max_block
            )
            spectra[name] = spectrum
            rows.append(dict(dataset=dataset, matrix=name, **asdict(stats)))
            for key in ("distinct", "frequencies", "bound"):
                results[f"{dataset}/{name}/{key}"] = float(getattr(stats, key))
            log.info("%s %s: %s", dataset, name, stats)
        title = f"{dataset}: eigenvalues (tolerance {tolerance:g})"
        figures[f"eigenvalues_{dataset}"] = spectrum_figure(spectra, title)
    return {"metrics": results, "tables": {"distinguishability": rows}, "figures": figures}
