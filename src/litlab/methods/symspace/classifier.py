"""A factor classifier trained on the full grid (held-out combinations included), used only to score.

Reconstructions of held-out images are scored by how often the classifier reads back the true factors:
a decoder that draws a plausible but wrong sprite (wrong shape, wrong place) is caught even when its
pixel error is moderate.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

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


def train_factor_classifier(
    images: torch.Tensor, factors: torch.Tensor, sizes: tuple[int, ...], epochs: int = 10, seed: int = 0
) -> FactorClassifier:
    """Fit a FactorClassifier on images (n, C, H, W) in [0, 1] and factor indices (n, f) with Adam."""
    generator = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    model = FactorClassifier(tuple(images.shape[1:]), sizes)
    optimizer = torch.optim.Adam(model.parameters(), lr=2e-3)
    for _ in range(epochs):
        for index in torch.randperm(len(images), generator=generator).split(128):
            logits = model(images[index])
            loss = sum(F.cross_entropy(lg, factors[index, j]) for j, lg in enumerate(logits))
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
    return model.eval()


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
