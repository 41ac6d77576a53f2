"""LightningModule for full-batch node classification with a spectral GNN, with or without AdaSpec."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import lightning as L
import matplotlib.pyplot as plt
import torch
from matplotlib.figure import Figure
from torch.nn import functional as F
from torch_geometric.data import Data
from torchmetrics.functional.classification import binary_auroc

from litlab.core.errors import LitlabError
from litlab.methods.adaspec.bases import DecoupledSpectralGNN
from litlab.methods.adaspec.matrix import AdaSpecMatrix, initial_b
from litlab.methods.adaspec.network import GraphModel
from litlab.optim import OptimizerFactory, SchedulerFactory

NetworkFactory = Callable[..., GraphModel]
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

    The network is built in ``bind_data(spec)`` from the data module's ``data_spec()`` (edges, features,
    class count, metric): AdaSpec holds one b per node, so the model belongs to one graph.
    Logs ``{stage}/loss`` and ``{stage}/acc`` (or ``{stage}/roc_auc`` for binary sets scored by ROC-AUC).

    Args:
        network: partial ``GraphModel`` (backbone and matrix set by config).
        optimizer: partial optimizer; its lr and weight decay apply to the layer weights.
        filter_lr, filter_weight_decay: for the filter coefficients (None: the optimizer's).
        matrix_lr, matrix_weight_decay: for AdaSpec's b (None: the optimizer's).
        metric: ``accuracy`` or ``roc_auc``; None takes the data's.
        test_in_validation: also log ``test/*`` in ``validation_step`` (full batch, so the test score at
            the best validation epoch is read off the same forward pass; the studies set it).
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
        test_in_validation: bool = False,
    ) -> None:
        super().__init__()
        if metric not in (None, *METRICS):
            raise LitlabError(f"model.metric must be null or one of {METRICS}, got {metric!r}")
        self.save_hyperparameters(logger=False, ignore=["network", "optimizer", "scheduler"])
        self.network_factory = network
        self.optimizer_factory = optimizer
        self.scheduler_factory = scheduler
        self.network: GraphModel | None = None
        self.metric = metric
        self.test_in_validation = test_in_validation

    def bind_data(self, spec: Mapping[str, Any]) -> None:
        """Build the network for the graph in ``spec`` (``edge_index``, ``features``, ``num_classes``,
        ``metric``: ``litlab.datamodules.graphs.node_data_spec``)."""
        missing = [key for key in ("edge_index", "features", "num_classes") if key not in spec]
        if missing:
            raise LitlabError(f"NodeClassifier needs a graph data spec; missing {', '.join(missing)}")
        self.network = self.network_factory(
            edge_index=spec["edge_index"], features=spec["features"], num_classes=int(spec["num_classes"])
        )
        self.metric = self.hparams.metric or spec.get("metric") or "accuracy"

    def logged_metrics(self) -> list[str]:
        """``{train,val,test}/{loss,<metric>}`` (both metric names while the data is not bound)."""
        names = [metric_key(self.metric)] if self.metric else [metric_key(m) for m in METRICS]
        return [f"{stage}/{name}" for stage in ("train", "val", "test") for name in ("loss", *names)]

    @property
    def bound_network(self) -> GraphModel:
        """The network, or a clear error when ``bind_data`` has not been called."""
        if self.network is None:
            raise LitlabError("NodeClassifier has no network yet: call bind_data(datamodule.data_spec())")
        return self.network

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.bound_network(x)

    def loss_and_score(
        self, logits: torch.Tensor, graph: Data, mask: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Cross-entropy and the metric on the nodes of ``mask``."""
        y = graph.y[mask]
        return F.cross_entropy(logits[mask], y), node_score(logits[mask], y, self.metric)

    def _scores(self, logits: torch.Tensor, graph: Data, stage: str) -> dict[str, torch.Tensor]:
        loss, score = self.loss_and_score(logits, graph, graph[f"{stage}_mask"])
        return {f"{stage}/loss": loss, f"{stage}/{metric_key(self.metric)}": score}

    def _log(self, scores: dict[str, torch.Tensor]) -> None:
        # One log_dict per step: each self.log call costs as much as a small graph's propagation step.
        self.log_dict(scores, on_step=False, on_epoch=True, prog_bar=True, batch_size=1)

    def training_step(self, batch: Data, batch_idx: int) -> torch.Tensor:
        scores = self._scores(self(batch.x), batch, "train")
        self._log(scores)
        return scores["train/loss"]

    def validation_step(self, batch: Data, batch_idx: int) -> None:
        logits = self(batch.x)
        scores = self._scores(logits, batch, "val")
        if self.test_in_validation:
            scores.update(self._scores(logits, batch, "test"))
        self._log(scores)

    def test_step(self, batch: Data, batch_idx: int) -> None:
        self._log(self._scores(self(batch.x), batch, "test"))

    def configure_optimizers(self) -> Any:
        hp = self.hparams
        groups = self.bound_network.parameter_groups(
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
