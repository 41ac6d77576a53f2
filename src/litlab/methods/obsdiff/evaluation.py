"""How a pruned DiT is judged without Inception weights: a small CNN trained on the procedural classes
gives class accuracy of samples and a feature space for KID; same-noise image error compares with the dense
model sample by sample."""

from __future__ import annotations

from typing import Any

import lightning as L
import torch
from torch import nn

from litlab.optim import OptimizerFactory


class ShapeClassifier(nn.Module):
    """Conv(3→16)·pool·Conv(16→32)·pool·Linear(→64) features, then a linear head; images (n, 3, S, S)."""

    def __init__(self, n_classes: int = 8, image_size: int = 16, width: int = 16) -> None:
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(3, width, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(width, 2 * width, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Flatten(),
            nn.Linear(2 * width * (image_size // 4) ** 2, 64),
            nn.ReLU(),
        )
        self.head = nn.Linear(64, n_classes)

    def features(self, images: torch.Tensor) -> torch.Tensor:
        """(n, 64) penultimate features (KID's feature space)."""
        return self.body(images)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        """(n, n_classes) logits."""
        return self.head(self.features(images))


class ClassifierModule(L.LightningModule):
    """Cross-entropy training of a ``ShapeClassifier`` (fit through ``litlab.fitting.Fitter``)."""

    def __init__(self, net: ShapeClassifier, optimizer: OptimizerFactory) -> None:
        super().__init__()
        self.net, self.optimizer_factory = net, optimizer

    def training_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> torch.Tensor:
        images, labels = batch
        loss = nn.functional.cross_entropy(self.net(images), labels)
        self.log("train/loss", loss, batch_size=len(images))
        return loss

    def validation_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> None:
        images, labels = batch
        accuracy = (self.net(images).argmax(-1) == labels).float().mean()
        self.log("val/acc", accuracy, batch_size=len(images))

    def configure_optimizers(self) -> Any:
        return self.optimizer_factory(params=self.net.parameters())


def kid(real: torch.Tensor, fake: torch.Tensor) -> float:
    """Unbiased MMD² with the cubic polynomial kernel k(x, y) = (xᵀy/d + 1)³ (KID), features (n, d)."""
    real, fake = real.double(), fake.double()
    d = real.shape[1]
    k_rr = (real @ real.T / d + 1) ** 3
    k_ff = (fake @ fake.T / d + 1) ** 3
    k_rf = (real @ fake.T / d + 1) ** 3
    m, n = len(real), len(fake)
    within_r = (k_rr.sum() - k_rr.diagonal().sum()) / (m * (m - 1))
    within_f = (k_ff.sum() - k_ff.diagonal().sum()) / (n * (n - 1))
    return float(within_r + within_f - 2 * k_rf.mean())


def image_error(images: torch.Tensor, reference: torch.Tensor) -> dict[str, float]:
    """Same-noise error of samples vs the dense model's: MSE and PSNR (pixels in [-1, 1], peak 2)."""
    mse = (images - reference).square().mean().item()
    return {"image_mse": mse, "psnr": 10 * torch.log10(torch.tensor(4.0 / max(mse, 1e-12))).item()}


@torch.no_grad()
def class_accuracy(classifier: nn.Module, images: torch.Tensor, labels: torch.Tensor) -> float:
    """Fraction of images the classifier assigns to the class they were sampled for."""
    return (classifier(images).argmax(-1) == labels).float().mean().item()
