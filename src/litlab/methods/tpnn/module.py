"""The fixed-order ANOVA-TPNN baseline as a LightningModule (gradient descent on the MSE)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import lightning as L
import matplotlib.pyplot as plt
import torch
from matplotlib.figure import Figure

from litlab.core.errors import ConfigError
from litlab.methods.tpnn.anova import ANOVATPNN


class ANOVATPNNRegressor(L.LightningModule):
    """Fit an ``ANOVATPNN`` of order ``order`` to standardised responses; RMSE on the original scale.

    The network is built in ``bind_data`` (it needs p and the response's sd from the data spec).

    Args:
        order: largest component order (2: ANOVA-T^2PNN, the paper's comparator).
        n_basis: TPNNs per component. lr, weight_decay: Adam's. init_seed: seeds the initial locations.
    """

    def __init__(
        self,
        order: int = 2,
        n_basis: int = 10,
        lr: float = 1e-2,
        weight_decay: float = 0.0,
        init_seed: int = 0,
    ) -> None:
        super().__init__()
        if order < 1 or n_basis < 1:
            raise ConfigError(f"model.order={order} and model.n_basis={n_basis} must be at least 1")
        self.save_hyperparameters()
        self.net: ANOVATPNN | None = None
        self.y_std = 1.0
        self._test: list[tuple[torch.Tensor, torch.Tensor]] = []

    def bind_data(self, spec: Mapping[str, Any]) -> None:
        """Build the network for ``spec['n_features']`` inputs; keep the response sd for RMSE."""
        self.y_std = float(spec["y_std"])
        self.feature_names = list(spec.get("feature_names", []))
        hp = self.hparams
        self.net = ANOVATPNN(int(spec["n_features"]), hp.order, hp.n_basis, hp.init_seed)

    def logged_metrics(self) -> list[str]:
        return ["train/loss", "val/loss", "val/rmse", "test/loss", "test/rmse"]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.net is None:
            raise ConfigError("ANOVATPNNRegressor: call bind_data(data.data_spec()) before using the model")
        return self.net(x)

    def training_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> torch.Tensor:
        x, y = batch
        loss = torch.nn.functional.mse_loss(self(x), y[:, 0])
        self.log("train/loss", loss, on_step=False, on_epoch=True, batch_size=len(x))
        return loss

    def _evaluate(self, batch: tuple[torch.Tensor, torch.Tensor], stage: str) -> torch.Tensor:
        x, y = batch
        prediction = self(x)
        mse = torch.nn.functional.mse_loss(prediction, y[:, 0])
        self.log(f"{stage}/loss", mse, batch_size=len(x))
        self.log(f"{stage}/rmse", mse.sqrt() * self.y_std, batch_size=len(x), prog_bar=True)
        return prediction

    def validation_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> None:
        self._evaluate(batch, "val")

    def on_test_epoch_start(self) -> None:
        self._test = []

    def test_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> None:
        self._evaluate(batch, "test")
        self._test.append((batch[0].detach(), batch[1].detach()))

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.Adam(self.parameters(), lr=self.hparams.lr, weight_decay=self.hparams.weight_decay)

    def component_norms(self, x: torch.Tensor) -> dict[tuple[int, ...], float]:
        """||f_S||_{2,n} on the original response scale for every component of the network."""
        norms = self.net.component_norms(x) * self.y_std
        return dict(zip(self.net.components, norms.tolist(), strict=True))

    def figures(self, stage: str) -> dict[str, Figure]:
        """The ten largest components on the test inputs."""
        if stage != "test" or not self._test or self.net is None:
            return {}
        x = torch.cat([b[0] for b in self._test])
        norms = sorted(self.component_norms(x).items(), key=lambda kv: -kv[1])[:10]
        names = self.feature_names or [f"x{j}" for j in range(self.net.n_features)]
        fig, ax = plt.subplots(figsize=(6, 3.5))
        ax.barh([" x ".join(names[j] for j in s) for s, _ in norms][::-1], [v for _, v in norms][::-1])
        ax.set_xlabel("||f_S||  (test inputs)")
        ax.set_title(f"ANOVA-TPNN order {self.hparams.order}: largest components")
        fig.tight_layout()
        return {"components": fig}
