"""LightningModule for full-batch node classification with a spectral GNN, with or without AdaSpec."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import lightning as L
import matplotlib.pyplot as plt
import torch
from matplotlib.figure import Figure
from torch.nn import functional as F
from torch_geometric.data import Data
from torchmetrics.functional.classification import binary_auroc

from litlab.methods.adaspec.bases import DecoupledSpectralGNN
from litlab.methods.adaspec.matrix import AdaSpecMatrix, initial_b
from litlab.methods.adaspec.network import GraphModel

NetworkFactory = Callable[..., GraphModel]
OptimizerFactory = Callable[..., torch.optim.Optimizer]
SchedulerFactory = Callable[..., torch.optim.lr_scheduler.LRScheduler]
METRICS = ("accuracy", "roc_auc")


def node_score(logits: torch.Tensor, y: torch.Tensor, metric: str) -> torch.Tensor:
    """Accuracy, or ROC-AUC of the positive-class probability (binary sets), of ``logits (m, C)``."""
    if metric == "accuracy":
        return (logits.argmax(dim=-1) == y).float().mean()
    if metric == "roc_auc":
        return binary_auroc(logits.softmax(dim=-1)[:, 1], y)
    raise ValueError(f"metric must be one of {METRICS}, got {metric!r}")


def metric_key(metric: str) -> str:
    """The logged name of a metric: ``acc`` or ``roc_auc``."""
    return "acc" if metric == "accuracy" else metric


class NodeClassifier(L.LightningModule):
    """Train a ``GraphModel`` on the training mask of one graph; score validation and test masks.

    The network is built in ``setup`` (or ``build``) once the graph is known: AdaSpec holds one b per node.
    Logs ``{stage}/loss`` and ``{stage}/acc`` (or ``{stage}/roc_auc`` for binary sets scored by ROC-AUC).

    Args:
        network: partial ``GraphModel`` (backbone and matrix set by config).
        optimizer: partial optimizer; its lr and weight decay apply to the layer weights.
        filter_lr, filter_weight_decay: for the filter coefficients (None: the optimizer's).
        matrix_lr, matrix_weight_decay: for AdaSpec's b (None: the optimizer's).
        metric: ``accuracy`` or ``roc_auc``; None takes the DataModule's.
    """

    def __init__(
        self,
        network: NetworkFactory,
        optimizer: OptimizerFactory,
        scheduler: SchedulerFactory | None = None,
        filter_lr: float | None = None,
        filter_weight_decay: float | None = None,
        matrix_lr: float | None = None,
        matrix_weight_decay: float | None = 0.0,
        metric: str | None = None,
    ) -> None:
        super().__init__()
        self.save_hyperparameters(logger=False, ignore=["network", "optimizer", "scheduler"])
        self.network_factory = network
        self.optimizer_factory = optimizer
        self.scheduler_factory = scheduler
        self.network: GraphModel | None = None
        self.metric = metric

    def build(self, graph: Data, metric: str | None = None) -> GraphModel:
        """Create the network for ``graph`` (``x, y, edge_index``) and fix the metric."""
        self.network = self.network_factory(
            edge_index=graph.edge_index, features=graph.x, num_classes=int(graph.y.max()) + 1
        )
        self.metric = self.metric or metric or "accuracy"
        return self.network

    def setup(self, stage: str) -> None:
        if self.network is None:
            datamodule = self.trainer.datamodule
            datamodule.setup(stage)
            self.build(datamodule.graph, getattr(datamodule, "metric", None))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.network(x)

    def loss_and_score(
        self, logits: torch.Tensor, graph: Data, mask: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Cross-entropy and the metric on the nodes of ``mask``."""
        y = graph.y[mask]
        return F.cross_entropy(logits[mask], y), node_score(logits[mask], y, self.metric)

    def _step(self, graph: Data, stage: str) -> torch.Tensor:
        logits = self(graph.x)
        loss, score = self.loss_and_score(logits, graph, graph[f"{stage}_mask"])
        self.log(f"{stage}/loss", loss, on_step=False, on_epoch=True, prog_bar=True, batch_size=1)
        self.log(
            f"{stage}/{metric_key(self.metric)}",
            score,
            on_step=False,
            on_epoch=True,
            prog_bar=True,
            batch_size=1,
        )
        return loss

    def training_step(self, batch: Data, batch_idx: int) -> torch.Tensor:
        return self._step(batch, "train")

    def validation_step(self, batch: Data, batch_idx: int) -> None:
        self._step(batch, "val")

    def test_step(self, batch: Data, batch_idx: int) -> None:
        self._step(batch, "test")

    def configure_optimizers(self) -> Any:
        hp = self.hparams
        groups = self.network.parameter_groups(
            hp.filter_lr, hp.filter_weight_decay, hp.matrix_lr, hp.matrix_weight_decay
        )
        optimizer = self.optimizer_factory(params=groups)
        if self.scheduler_factory is None:
            return optimizer
        return {"optimizer": optimizer, "lr_scheduler": self.scheduler_factory(optimizer=optimizer)}

    def figures(self, stage: str) -> dict[str, Figure]:
        """The learned filter response over S's spectrum and, with AdaSpec, the learned b against its init."""
        if stage != "test" or self.network is None:
            return {}
        figures: dict[str, Figure] = {}
        backbone = self.network.backbone
        if isinstance(backbone, DecoupledSpectralGNN):
            grid = torch.linspace(-1, 1, 201, device=self.device)
            response = backbone.response(grid).cpu()
            if torch.allclose(response, response[:, :1]):  # coefficients shared across channels
                response = response[:, :1]
            grid = grid.cpu()
            fig, ax = plt.subplots(figsize=(5, 3.5))
            ax.plot(grid, response)
            ax.set_xlabel("eigenvalue λ of S (Ã, or Ω rescaled)")
            ax.set_ylabel("h(λ)")
            ax.set_title(f"{type(backbone).__name__} filter response")
            figures["filter_response"] = fig
        if isinstance(self.network.matrix, AdaSpecMatrix):
            matrix = self.network.matrix
            fig, ax = plt.subplots(figsize=(5, 3.5))
            ax.scatter(initial_b(matrix.degree, matrix.b_init).cpu(), matrix.b.detach().cpu(), s=4)
            ax.set_xlabel(f"initial b ({matrix.b_init})")
            ax.set_ylabel("learned b")
            ax.set_xscale("log")
            ax.set_yscale("log")
            figures["adaspec_b"] = fig
        return figures
