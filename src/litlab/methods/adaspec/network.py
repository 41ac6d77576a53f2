"""A base spectral GNN bound to one graph, on its native matrix or on AdaSpec's Ω (chosen by config)."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from litlab.methods.adaspec.matrix import AdaSpecMatrix, NativeMatrix

BackboneFactory = Callable[..., nn.Module]
MatrixFactory = Callable[..., AdaSpecMatrix]


class GraphModel(nn.Module):
    """``backbone(X, S)`` with ``S`` from ``matrix()``: the base's own Ã, or AdaSpec's Ω when given.

    The model is transductive (AdaSpec learns one b per node), so it is built for one graph.

    Args:
        backbone: ``(in_channels, out_channels) -> base`` (a partial of a class in ``bases``).
        matrix: ``(edge_index, features) -> AdaSpecMatrix`` partial, or None for the base's own matrix.
        edge_index: ``(2, E)``; features: ``(n, h)``; num_classes: output width.
    """

    def __init__(
        self,
        backbone: BackboneFactory,
        matrix: MatrixFactory | None,
        edge_index: torch.Tensor,
        features: torch.Tensor,
        num_classes: int,
    ) -> None:
        super().__init__()
        self.backbone = backbone(in_channels=features.size(1), out_channels=num_classes)
        if matrix is None:
            self.matrix: nn.Module = NativeMatrix(edge_index, features.size(0), self.backbone.self_loops)
        else:
            self.matrix = matrix(edge_index=edge_index, features=features)

    @property
    def adaptive(self) -> bool:
        return isinstance(self.matrix, AdaSpecMatrix)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x: (n, h)`` node features -> ``(n, num_classes)`` logits."""
        return self.backbone(x, self.matrix())

    def parameter_groups(
        self,
        filter_lr: float | None = None,
        filter_weight_decay: float | None = None,
        matrix_lr: float | None = None,
        matrix_weight_decay: float | None = None,
    ) -> list[dict]:
        """Optimizer groups: layer/MLP weights, filter coefficients, AdaSpec's b. The last two may have
        their own lr and weight decay (GPRGNN, BernNet and ChebNetII set the filter's apart); a None
        keeps the optimizer's default. Empty groups are dropped."""
        filter_params = list(self.backbone.filter_parameters())
        filter_ids = {id(p) for p in filter_params}
        main = [p for p in self.backbone.parameters() if id(p) not in filter_ids]
        matrix_params = [p for p in self.matrix.parameters() if p.requires_grad]
        groups = [
            {"params": main},
            {"params": filter_params, "lr": filter_lr, "weight_decay": filter_weight_decay},
            {"params": matrix_params, "lr": matrix_lr, "weight_decay": matrix_weight_decay},
        ]
        return [{k: v for k, v in g.items() if v is not None} for g in groups if g["params"]]
