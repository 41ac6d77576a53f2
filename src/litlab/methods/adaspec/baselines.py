"""The trivial baseline the AdaSpec claim invites: predict the majority class of the labelled nodes.

With AdaSpec's 2.5/2.5/95 split the training mask holds the same number of nodes per class, so the
majority is taken over training and validation nodes together, the labels a model may use. (The class
share of the test nodes, e.g. 55 % for Texas/Cornell's largest class, is what this baseline reaches when
the labelled majority is the true one.)
"""

from __future__ import annotations

import torch
from torch_geometric.data import Data


def majority_class(graph: Data) -> int:
    """The most frequent class among the training and validation nodes (lowest class id on ties)."""
    labelled = graph.y[graph.train_mask | graph.val_mask]
    return int(torch.bincount(labelled, minlength=int(graph.y.max()) + 1).argmax())


def majority_class_score(graph: Data, metric: str = "accuracy") -> float:
    """Test score of predicting ``majority_class`` everywhere: its accuracy, or 0.5 ROC-AUC (a constant)."""
    if metric == "roc_auc":
        return 0.5
    return float((graph.y[graph.test_mask] == majority_class(graph)).float().mean())
