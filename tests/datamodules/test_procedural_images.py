"""Procedural class-conditional shapes: seeded, balanced, in range, and the class decides shape and colour."""

from __future__ import annotations

import pytest
import torch

from litlab.core.errors import ConfigError
from litlab.datamodules.procedural_images import (
    PALETTE,
    ProceduralImagesDataModule,
    make_dataset,
    render_shapes,
)


def test_images_are_seeded_balanced_and_in_range() -> None:
    images, labels = make_dataset(64, 8, 16, seed=3)
    again, _ = make_dataset(64, 8, 16, seed=3)
    assert images.shape == (64, 3, 16, 16) and torch.equal(images, again)
    assert images.min() >= -1 and images.max() <= 1
    assert torch.bincount(labels, minlength=8).tolist() == [8] * 8
    assert not torch.equal(images, make_dataset(64, 8, 16, seed=4)[0])


def test_class_sets_the_colour_of_the_shape() -> None:
    labels = torch.tensor([0, 4])  # a red and a blue square
    images = (render_shapes(labels, 16, seed=0) + 1) / 2
    brightest = images.amax(dim=(2, 3))
    assert brightest[0, 0] > brightest[0, 2] and brightest[1, 2] > brightest[1, 0]
    assert len(PALETTE) * 4 == 16


def test_each_shape_has_its_own_area_at_the_same_pose() -> None:
    """Same seed = same centre and size for every class: the four shapes cover different pixel counts."""
    images = render_shapes(torch.arange(4), 16, seed=0)
    areas = [int((img.amax(0) > 0).sum()) for img in images]  # background stays below 0 in [-1, 1]
    assert len(set(areas)) == 4


def test_data_module_spec_and_batches() -> None:
    data = ProceduralImagesDataModule(n_train=32, n_val=8, n_test=8, batch_size=8, image_size=8)
    assert data.data_spec() == {"image_size": 8, "channels": 3, "n_classes": 8}
    images, labels = next(iter(data.train_dataloader()))
    assert images.shape == (8, 3, 8, 8) and labels.dtype == torch.int64


def test_bad_configs_are_config_errors() -> None:
    with pytest.raises(ConfigError, match="n_classes"):
        make_dataset(4, 17, 8, 0)
    with pytest.raises(ConfigError, match="image_size"):
        ProceduralImagesDataModule(image_size=2)
