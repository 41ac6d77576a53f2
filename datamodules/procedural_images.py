"""Seeded procedural class-conditional images: coloured shapes whose class fixes shape and colour.

Class ``c`` draws shape ``SHAPES[c % 4]`` in colour ``PALETTE[c // 4]`` (so 8 classes by default) at a
random centre and size on a dark, slightly noisy background; pixels are in [-1, 1], shape
``(n, 3, size, size)``. Rendering is one vectorised pass over the batch (no loops over samples), so
tens of thousands of 16x16 images take well under a second; no cache is needed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch.utils.data import DataLoader

from litlab.core.errors import ConfigError
from litlab.datamodules.base import GlobalBatchDataModule, TensorBatchDataset, batch_loader

SHAPES = ("square", "disc", "triangle", "cross")
PALETTE = ((0.95, 0.25, 0.2), (0.2, 0.55, 0.95), (0.3, 0.9, 0.3), (0.95, 0.85, 0.2))
MAX_CLASSES = len(SHAPES) * len(PALETTE)


def _shape_masks(dx: torch.Tensor, dy: torch.Tensor) -> torch.Tensor:
    """(4, n, S, S) boolean masks of every shape at the normalised offsets dx, dy (n, S, S)."""
    square = (dx.abs() <= 0.8) & (dy.abs() <= 0.8)
    disc = dx.square() + dy.square() <= 1.0
    triangle = (dy <= 0.75) & (dy >= 2.0 * dx.abs() - 1.0)
    cross = ((dx.abs() <= 0.3) & (dy.abs() <= 1.0)) | ((dy.abs() <= 0.3) & (dx.abs() <= 1.0))
    return torch.stack([square, disc, triangle, cross])


def render_shapes(labels: torch.Tensor, image_size: int, seed: int) -> torch.Tensor:
    """Images (n, 3, S, S) in [-1, 1] for class ``labels`` (n,), seeded by ``seed``."""
    if labels.numel() and (labels.min() < 0 or labels.max() >= MAX_CLASSES):
        raise ConfigError(f"labels must lie in [0, {MAX_CLASSES}); got {labels.min()}..{labels.max()}")
    generator = torch.Generator().manual_seed(seed)
    n = labels.numel()
    centre = (torch.rand(n, 2, generator=generator) - 0.5) * 0.7
    radius = 0.45 + 0.3 * torch.rand(n, 1, 1, generator=generator)
    axis = torch.linspace(-1.0, 1.0, image_size)
    dy = (axis.view(1, -1, 1) - centre[:, 1].view(-1, 1, 1)) / radius
    dx = (axis.view(1, 1, -1) - centre[:, 0].view(-1, 1, 1)) / radius
    masks = _shape_masks(dx, dy)  # (4, n, S, S)
    mask = masks[labels % len(SHAPES), torch.arange(n)].unsqueeze(1).float()
    colour = torch.tensor(PALETTE)[labels // len(SHAPES)]
    colour = (colour + 0.08 * torch.randn(n, 3, generator=generator)).clamp(0, 1).view(n, 3, 1, 1)
    background = 0.1 + 0.15 * torch.rand(n, 1, 1, 1, generator=generator)
    noise = 0.03 * torch.randn(n, 3, image_size, image_size, generator=generator)
    image = mask * colour + (1 - mask) * background + noise
    return (2.0 * image - 1.0).clamp(-1.0, 1.0)


def make_dataset(n: int, n_classes: int, image_size: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` images with balanced seeded labels: (images (n, 3, S, S), labels (n,) int64)."""
    if not 1 <= n_classes <= MAX_CLASSES:
        raise ConfigError(f"n_classes must be in [1, {MAX_CLASSES}], got {n_classes}")
    generator = torch.Generator().manual_seed(seed)
    labels = torch.arange(n) % n_classes
    labels = labels[torch.randperm(n, generator=generator)]
    return render_shapes(labels, image_size, seed + 1), labels


class ProceduralImagesDataModule(GlobalBatchDataModule):
    """Train/val/test splits of procedural shape images; batches are ``(images, labels)``.

    Args:
        n_train, n_val, n_test: images per split (each split its own seed).
        n_classes: classes (<= 16); image_size: side in pixels; seed: the data seed.
    """

    def __init__(
        self,
        n_train: int = 8192,
        n_val: int = 512,
        n_test: int = 512,
        n_classes: int = 8,
        image_size: int = 16,
        batch_size: int = 64,
        seed: int = 0,
        num_workers: int = 0,
    ) -> None:
        super().__init__(batch_size, num_workers)
        if image_size < 4:
            raise ConfigError(f"data.image_size must be >= 4, got {image_size}")
        self.n_train, self.n_val, self.n_test = n_train, n_val, n_test
        self.n_classes, self.image_size, self.seed = n_classes, image_size, seed
        self.splits: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}

    def data_spec(self) -> Mapping[str, Any]:
        """What the model needs: image side, channels and classes."""
        return {"image_size": self.image_size, "channels": 3, "n_classes": self.n_classes}

    def setup(self, stage: str | None = None) -> None:
        if self.splits:
            return
        sizes = {"train": self.n_train, "val": self.n_val, "test": self.n_test}
        for offset, (name, n) in enumerate(sizes.items()):
            self.splits[name] = make_dataset(
                n, self.n_classes, self.image_size, self.seed * 1000 + 10 * offset
            )

    def _loader(self, split: str, shuffle: bool) -> DataLoader:
        self.setup()
        dataset = TensorBatchDataset(*self.splits[split])
        return batch_loader(dataset, self.per_device_batch_size, shuffle, self.seed, self.num_workers)

    def train_dataloader(self) -> DataLoader:
        return self._loader("train", True)

    def val_dataloader(self) -> DataLoader:
        return self._loader("val", False)

    def test_dataloader(self) -> DataLoader:
        return self._loader("test", False)
