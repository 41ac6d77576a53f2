"""A factor classifier trained on the full grid (held-out combinations included), used only to score.

Reconstructions of held-out images are scored by how often the classifier reads back the true factors:
a decoder that draws a plausible but wrong sprite (wrong shape, wrong place) is caught even when its
pixel error is moderate.
"""

from __future__ import annotations

import lightning as L
import torch
from torch import nn
from torch.nn import functional as F

from litlab.datamodules.base import TensorBatchDataset, batch_loader
from litlab.fitting import Fitter
from litlab.methods.symspace.networks import conv_trunk


class FactorClassifier(nn.Module):
    """Image (B, C, H, W) -> one logit vector per factor, (B, sizes[f]) each."""

    def __init__(self, image_shape: tuple[int, int, int], sizes: tuple[int, ...], hidden: int = 256) -> None:
        super().__init__()
        channels, height, width = image_shape
        self.trunk = nn.Sequential(conv_trunk(channels, (32, 64, 64, 128)), nn.Flatten())
        flat = 128 * (height // 16) * (width // 16)
        self.heads = nn.ModuleList(
            nn.Sequential(nn.Linear(flat, hidden), nn.SiLU(), nn.Linear(hidden, n)) for n in sizes
        )

    def forward(self, images: torch.Tensor) -> list[torch.Tensor]:
        h = self.trunk(images)
        return [head(h) for head in self.heads]


class ClassifierFit(L.LightningModule):
    """What the Fitter trains: the summed cross-entropy of every factor head, Adam at ``lr``."""

    def __init__(self, classifier: FactorClassifier, lr: float = 2e-3) -> None:
        super().__init__()
        self.classifier, self.lr = classifier, lr

    def training_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> torch.Tensor:
        images, factors = batch
        return sum(F.cross_entropy(lg, factors[:, j]) for j, lg in enumerate(self.classifier(images)))

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.Adam(self.parameters(), lr=self.lr)


def train_factor_classifier(
    fitter: Fitter,
    images: torch.Tensor,
    factors: torch.Tensor,
    sizes: tuple[int, ...],
    epochs: int = 10,
    seed: int = 0,
) -> FactorClassifier:
    """Fit a FactorClassifier on images (n, C, H, W) in [0, 1] and factor indices (n, f); Adam, batch 128."""
    torch.manual_seed(seed)
    classifier = FactorClassifier(tuple(images.shape[1:]), sizes)
    loader = batch_loader(TensorBatchDataset(images, factors), 128, shuffle=True, seed=seed, num_workers=0)
    fitter.fit(ClassifierFit(classifier), loader, max_epochs=epochs, seed=seed)
    return classifier.eval()


@torch.no_grad()
def factor_accuracy(
    classifier: FactorClassifier, images: torch.Tensor, factors: torch.Tensor, names: tuple[str, ...]
) -> dict[str, float]:
    """Per-factor accuracy of images (n, C, H, W), and ``all``: every factor but orientation right.

    Orientation is left out of ``all`` because squares and ellipses look the same under some rotations.
    """
    predictions = torch.stack([lg.argmax(1) for lg in classifier(images)], dim=1)
    correct = predictions == factors
    accuracy = {name: float(correct[:, j].float().mean()) for j, name in enumerate(names)}
    keep = [j for j, name in enumerate(names) if name != "orientation"]
    return {**accuracy, "all": float(correct[:, keep].all(1).float().mean())}
