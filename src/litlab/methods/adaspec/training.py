"""The spectral-GNN training protocol through the project's one fitter (``litlab.fitting.Fitter``).

Full batch: every epoch is one optimizer step on the training mask, then one validation forward; model
selection as in GPRGNN/BernNet (and AdaSpec): the epoch with the lowest validation loss, stopping after
``patience`` epochs without a new lowest. The module logs ``test/*`` in the same validation forward, so
the test score at the selected epoch is read without keeping a copy of the weights. Equal, bit for bit,
to the hand-written loop it replaced (``tests/methods/adaspec/test_training.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch_geometric.data import Data

from litlab.datamodules.graphs import node_data_spec
from litlab.fitting import Fitter
from litlab.methods.adaspec.module import NodeClassifier, metric_key


@dataclass(frozen=True)
class NodeFit:
    """Scores at the epoch of lowest validation loss (``best_epoch``, 0-based), and how long the run went."""

    val_score: float
    test_score: float
    val_loss: float
    best_epoch: int
    epochs: int
    seconds: float


def fit_node_classifier(
    fitter: Fitter,
    module: NodeClassifier,
    graph: Data,
    metric: str = "accuracy",
    max_epochs: int = 1000,
    patience: int = 200,
    seed: int = 0,
) -> NodeFit:
    """Bind ``module`` to ``graph`` (network built under ``torch.manual_seed(seed)``), train it full batch
    with ``fitter``, and return the scores at the lowest validation loss.

    The same seed gives a base model and its AdaSpec variant the same MLP initialisation and dropout
    draws (the RNG stream continues from the build into training), so per-seed scores pair.
    """
    graph = graph.to(fitter.fabric.device)
    torch.manual_seed(seed)
    module.bind_data(node_data_spec(graph, metric))
    module.test_in_validation = True
    fit = fitter.fit(
        module,
        [graph],
        [graph],
        max_epochs=max_epochs,
        val_every_n_steps=1,
        monitor="val/loss",
        patience=patience,
    )
    key = metric_key(module.metric)
    return NodeFit(
        val_score=fit.metrics[f"val/{key}"],
        test_score=fit.metrics[f"test/{key}"],
        val_loss=fit.metrics["val/loss"],
        best_epoch=int(fit.best_step) - 1,
        epochs=fit.steps,
        seconds=fit.seconds,
    )
