"""A plain full-batch training loop for many small runs (seed sweeps, the benchmark table, the claim test).

It uses the NodeClassifier's own network, optimizer groups, loss and metric, so a sweep here trains the
same model as ``litlab-train``; it skips the Trainer, whose per-epoch overhead dominates on graphs of a few
hundred nodes. Model selection as in GPRGNN/BernNet: the epoch with the lowest validation loss, stopping
after ``patience`` epochs without a new lowest.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import torch
from torch_geometric.data import Data

from litlab.methods.adaspec.module import NodeClassifier


@dataclass(frozen=True)
class FitResult:
    """Scores at the epoch of lowest validation loss, and how long the run went."""

    val_score: float
    test_score: float
    val_loss: float
    best_epoch: int
    epochs: int
    seconds: float


def train_step(module: NodeClassifier, optimizer: torch.optim.Optimizer, graph: Data) -> None:
    """One full-batch optimiser step on the training mask of ``graph``."""
    module.train()
    optimizer.zero_grad(set_to_none=True)
    loss, _ = module.loss_and_score(module(graph.x), graph, graph.train_mask)
    loss.backward()
    optimizer.step()


def fit_full_batch(
    module: NodeClassifier,
    graph: Data,
    metric: str = "accuracy",
    max_epochs: int = 1000,
    patience: int = 200,
    seed: int = 0,
) -> FitResult:
    """Build ``module``'s network for ``graph`` (seeded), train it full-batch, return the selected scores.

    The same seed gives a base model and its AdaSpec variant identical MLP initialisation and dropout
    draws, so their per-seed scores can be compared pairwise.
    """
    torch.manual_seed(seed)
    module.build(graph, metric)
    optimizer = module.configure_optimizers()
    if not isinstance(optimizer, torch.optim.Optimizer):
        raise ValueError("fit_full_batch supports a plain optimizer; set model.scheduler=null")
    best = (math.inf, math.nan, math.nan, -1)
    start = time.perf_counter()
    epoch = 0
    for epoch in range(max_epochs):
        train_step(module, optimizer, graph)
        module.eval()
        with torch.no_grad():
            logits = module(graph.x)
            val_loss, val_score = module.loss_and_score(logits, graph, graph.val_mask)
            if float(val_loss) < best[0]:
                _, test_score = module.loss_and_score(logits, graph, graph.test_mask)
                best = (float(val_loss), float(val_score), float(test_score), epoch)
            elif epoch - best[3] >= patience:
                break
    return FitResult(
        val_score=best[1],
        test_score=best[2],
        val_loss=best[0],
        best_epoch=best[3],
        epochs=epoch + 1,
        seconds=time.perf_counter() - start,
    )
