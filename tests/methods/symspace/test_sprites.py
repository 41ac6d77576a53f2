"""Sprites: rendering is reproducible, masks scale the paper's, splits never leak held-out combinations."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from litlab.core.errors import LitlabError
from litlab.datamodules.sprites import (
    DSPRITES_SIZES,
    SpriteGrid,
    SpritesDataModule,
    factor_grid,
    recombination_mask,
    render_sprites,
)

SMALL = {"n_scales": 2, "n_orientations": 4, "n_positions": 4, "image_size": 16}


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("LITLAB_CACHE", str(tmp_path / "cache"))


def test_render_shapes_sizes_and_positions() -> None:
    grid = SpriteGrid(n_scales=2, n_orientations=4, n_positions=2, image_size=32)
    factors = np.array([[0, 0, 0, 0, 0], [0, 1, 0, 0, 0], [1, 1, 0, 1, 1], [2, 1, 0, 1, 0]])
    images = render_sprites(factors, grid)
    assert images.shape == (4, 32, 32) and images.dtype == np.uint8 and set(np.unique(images)) <= {0, 1}
    # a larger scale covers more pixels; a square of half-side 0.8 r covers about (1.6 r)² pixels
    assert images[1].sum() > 2 * images[0].sum()
    r = 0.2 * 32
    assert abs(images[1].sum() - (1.6 * r) ** 2) < 0.15 * (1.6 * r) ** 2
    # x index 1 moves the sprite right, y index 1 moves it down (image rows grow downwards)
    cols = np.nonzero(images[2].any(0))[0]
    rows = np.nonzero(images[2].any(1))[0]
    assert cols.mean() > 16 and rows.mean() > 16
    assert np.nonzero(images[3].any(1))[0].mean() < 16


def test_orientation_rotates_the_ellipse() -> None:
    grid = SpriteGrid(n_scales=1, n_orientations=4, n_positions=1, image_size=32)
    flat, upright = render_sprites(np.array([[1, 0, 0, 0, 0], [1, 0, 1, 0, 0]]), grid)

    def extent(image: np.ndarray) -> tuple[int, int]:
        return np.ptp(np.nonzero(image.any(0))[0]), np.ptp(np.nonzero(image.any(1))[0])  # (width, height)

    assert extent(flat)[0] > 1.5 * extent(flat)[1]  # wide at angle 0
    assert extent(upright) == extent(flat)[::-1]  # a quarter turn later it stands up
    assert flat.sum() == upright.sum()


def test_masks_on_the_dsprites_grid_are_the_papers() -> None:
    factors = factor_grid(DSPRITES_SIZES)
    shape, scale, orient, x, y = factors.T
    expected = {
        ("r2e", 0): (shape == 1) & (scale == 0) & (orient >= 14) & (orient <= 27) & (x >= 20) & (y >= 20),
        ("r2e", 1): (scale == 0) & (orient == 0) & (x <= 7) & (y <= 7),
        ("r2e", 2): (shape == 2) & (orient == 0) & (x >= 16) & (y >= 16),
        ("r2r", 0): (shape == 2) & (x >= 16),
        ("r2r", 1): (shape == 0) & (x < 16),
        ("r2r", 2): (shape == 1) & (scale >= 3) & (y < 16),
    }
    for (split, case), mask in expected.items():
        np.testing.assert_array_equal(recombination_mask(factors, DSPRITES_SIZES, split, case), mask)


def test_masks_scale_to_the_small_grid() -> None:
    sizes = SpriteGrid().sizes  # 3 × 4 × 8 × 8 × 8
    factors = factor_grid(sizes)
    counts = [int(recombination_mask(factors, sizes, s, c).sum()) for s in ("r2e", "r2r") for c in range(3)]
    # r2e: ellipse·scale0·orient{3,4,5}·x,y{5,6,7}; all·scale0·orient0·x,y{0,1}; heart·orient0·x,y{4..7}
    assert counts == [27, 12, 64, 1024, 1024, 512]
    with pytest.raises(LitlabError, match="split=r2e"):
        recombination_mask(factors, sizes, "r2x", 0)


@pytest.mark.parametrize("split,case", [("r2e", 0), ("r2e", 2), ("r2r", 0), ("r2r", 2)])
def test_splits_never_leak_a_held_out_combination(split: str, case: int) -> None:
    data = SpritesDataModule(split=split, case=case, grid=SMALL, batch_size=8)
    data.setup()
    sizes = SpriteGrid(**SMALL).sizes
    combos = {
        name: {tuple(f) for f in data.sets[name].tensors[1].tolist()} for name in ("train", "val", "test")
    }
    held = {
        tuple(f)
        for f in factor_grid(sizes)[recombination_mask(factor_grid(sizes), sizes, split, case)].tolist()
    }
    assert combos["test"] == held and held
    assert not (combos["train"] | combos["val"]) & held
    assert not combos["train"] & combos["val"]
    assert len(combos["train"]) + len(combos["val"]) + len(held) == np.prod(sizes)


def test_a_grid_too_coarse_for_the_held_out_region_fails_with_a_fix() -> None:
    grid = {"n_scales": 2, "n_orientations": 1, "n_positions": 8, "image_size": 16}
    with pytest.raises(LitlabError, match="n_orientations"):
        SpritesDataModule(split="r2e", case=0, grid=grid).setup()


def test_datamodule_is_reproducible_and_batches_are_floats() -> None:
    a = SpritesDataModule(grid=SMALL, batch_size=8, seed=3)
    b = SpritesDataModule(grid=SMALL, batch_size=8, seed=3)
    a.setup()
    b.setup()  # the second one reads the cache the first one wrote
    for name in ("train", "val", "test"):
        for ta, tb in zip(a.sets[name].tensors, b.sets[name].tensors):
            assert torch.equal(ta, tb)
    images, factors = next(iter(a.train_dataloader()))
    assert images.shape == (8, 1, 16, 16) and images.dtype == torch.float32 and factors.shape == (8, 5)
    first = next(iter(b.train_dataloader()))[1]
    assert torch.equal(factors, first)
    assert a.image_shape == (1, 16, 16)
    assert len(a.test_dataloader()) == 2


def test_missing_real_file_says_where_to_put_it(tmp_path) -> None:
    data = SpritesDataModule(source="dsprites", root=str(tmp_path), batch_size=8)
    with pytest.raises(LitlabError, match="dsprites_ndarray"):
        data.setup()


def test_real_dsprites_file_is_read_with_its_factors(tmp_path) -> None:
    factors = factor_grid((1, 3, 6, 40, 32, 32))[::997]
    images = np.zeros((len(factors), 64, 64), dtype=np.uint8)
    images[:, 0, 0] = 1
    np.savez(
        tmp_path / "dsprites_ndarray_co1sh3sc6or40x32y32_64x64.npz", imgs=images, latents_classes=factors
    )
    data = SpritesDataModule(source="dsprites", root=str(tmp_path), batch_size=8, split="r2r", case=0)
    data.setup()
    held = data.sets["test"].tensors[1]
    assert len(held) and (held[:, 0] == 2).all() and (held[:, 3] >= 16).all()
    assert data.image_shape == (1, 64, 64) and data.sizes == DSPRITES_SIZES
