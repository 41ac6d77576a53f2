"""dSprites-like images and the recombination splits (Montero et al. 2021) for combinatorial generalisation.

``render_sprites`` draws binary shapes (square, ellipse, heart) for every combination of shape × scale ×
orientation × x × y, seeded and cached under ``$LITLAB_CACHE/sprites``. ``recombination_mask`` marks the
held-out combinations of the R2E (recombination-to-element) and R2R (recombination-to-range) cases; the
test set is exactly those images and nothing in them is trained on. The real dSprites / 3D Shapes / MPI3D
files are read when a user has them (``source=dsprites|shapes3d|mpi3d``, ``root=``).

Masks are written in the paper's dSprites factor indices (3 shapes, 6 scales, 40 orientations, 32 x, 32 y)
and scaled to any grid: index ``i`` of ``n`` values is inside ``[lo, hi)`` of ``N`` paper values when
``lo / N <= i / n < hi / N``, so on the real dSprites grid they are the paper's masks exactly.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass

import numpy as np
import torch
from torch.utils.data import DataLoader, TensorDataset, default_collate

from litlab.core.cache import write_npz_atomic
from litlab.core.errors import LitlabError
from litlab.core.paths import cache_dir, find_data
from litlab.datamodules.base import GlobalBatchDataModule

SHAPES = ("square", "ellipse", "heart")
FACTORS = ("shape", "scale", "orientation", "x", "y")
DSPRITES_SIZES = (3, 6, 40, 32, 32)
REAL_FILES = {
    "dsprites": "dsprites_ndarray_co1sh3sc6or40x32y32_64x64.npz",
    "shapes3d": "3dshapes.h5",
    "mpi3d": "mpi3d_toy.npz",
}

# Held-out region per case: {factor: (lo, hi)} in dSprites indices (hi exclusive); a missing factor = all.
RECOMBINATION_CASES: dict[str, tuple[dict[str, tuple[int, int]], ...]] = {
    "r2e": (
        {"shape": (1, 2), "scale": (0, 1), "orientation": (14, 28), "x": (20, 32), "y": (20, 32)},
        {"scale": (0, 1), "orientation": (0, 1), "x": (0, 8), "y": (0, 8)},
        {"shape": (2, 3), "orientation": (0, 1), "x": (16, 32), "y": (16, 32)},
    ),
    "r2r": (
        {"shape": (2, 3), "x": (16, 32)},
        {"shape": (0, 1), "x": (0, 16)},
        {"shape": (1, 2), "scale": (3, 6), "y": (0, 16)},
    ),
}


@dataclass(frozen=True)
class SpriteGrid:
    """Factor grid of the procedural data: how many values each factor takes, and the canvas size."""

    n_scales: int = 4
    n_orientations: int = 8
    n_positions: int = 8
    image_size: int = 32
    supersample: int = 2

    @property
    def sizes(self) -> tuple[int, ...]:
        """Number of values of (shape, scale, orientation, x, y)."""
        return (len(SHAPES), self.n_scales, self.n_orientations, self.n_positions, self.n_positions)


def factor_grid(sizes: tuple[int, ...]) -> np.ndarray:
    """Every combination of factor indices, row-major (last factor fastest): (prod(sizes), len(sizes))."""
    return np.stack(np.meshgrid(*[np.arange(n) for n in sizes], indexing="ij"), -1).reshape(-1, len(sizes))


def _inside(shape: np.ndarray, u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Whether shape-local points (u, v) (unit radius, v up) lie inside each sprite's shape."""
    square = (np.abs(u) <= 0.8) & (np.abs(v) <= 0.8)
    ellipse = u**2 + (v / 0.5) ** 2 <= 1.0
    # The classic heart curve (x² + y² − 1)³ − x² y³ ≤ 0, scaled to unit radius and centred.
    hu, hv = 1.25 * u, 1.25 * v + 0.15
    heart = (hu**2 + hv**2 - 1.0) ** 3 - hu**2 * hv**3 <= 0.0
    return np.where(shape == 0, square, np.where(shape == 1, ellipse, heart))


def render_sprites(factors: np.ndarray, grid: SpriteGrid) -> np.ndarray:
    """Binary images of the sprites with factor indices ``factors`` (n, 5): uint8 (n, size, size).

    A pixel is on when at least half of its ``supersample``² sub-pixels fall inside the rotated, scaled
    shape. Scales run 0.5..1 of the largest radius (a fifth of the canvas), orientations cover [0, 2π) and
    centres a central band that keeps every sprite on the canvas (as in dSprites).
    """
    size, ss = grid.image_size, grid.supersample
    sub = ((np.arange(size * ss) + 0.5) / ss).astype(np.float32)  # sub-pixel centres in pixel units
    py, px = np.meshgrid(sub, sub, indexing="ij")
    radius = (0.2 * size * np.linspace(0.5, 1.0, grid.n_scales)[factors[:, 1]]).astype(np.float32)
    angle = (2 * math.pi * factors[:, 2] / grid.n_orientations).astype(np.float32)
    centres = np.linspace(0.25 * size, 0.75 * size, grid.n_positions, dtype=np.float32)
    cx, cy = centres[factors[:, 3]], centres[factors[:, 4]]
    images = np.empty((len(factors), size, size), dtype=np.uint8)
    for start in range(0, len(factors), 512):  # chunks bound the memory of the supersampled canvas
        s = slice(start, start + 512)
        dx = (px[None] - cx[s, None, None]) / radius[s, None, None]
        dy = (cy[s, None, None] - py[None]) / radius[s, None, None]  # image rows grow downwards
        cos, sin = np.cos(angle[s])[:, None, None], np.sin(angle[s])[:, None, None]
        u, v = cos * dx + sin * dy, -sin * dx + cos * dy
        hit = _inside(factors[s, 0, None, None], u, v).reshape(-1, size, ss, size, ss)
        images[s] = hit.mean(axis=(2, 4)) >= 0.5
    return images


def procedural_sprites(grid: SpriteGrid) -> tuple[np.ndarray, np.ndarray]:
    """All images of ``grid`` and their factor indices, cached: (uint8 (n, s, s), int64 (n, 5))."""
    key = hashlib.sha1(json.dumps(grid.__dict__, sort_keys=True).encode()).hexdigest()[:10]
    path = cache_dir("sprites") / f"procedural_{key}.npz"
    if path.exists():
        with np.load(path) as stored:
            return stored["images"], stored["factors"]
    factors = factor_grid(grid.sizes)
    images = render_sprites(factors, grid)
    write_npz_atomic(path, {"images": images, "factors": factors})
    return images, factors


def recombination_mask(factors: np.ndarray, sizes: tuple[int, ...], split: str, case: int) -> np.ndarray:
    """Boolean (n,) mask of the held-out combinations of ``split`` ("r2e"/"r2r") ``case`` (0, 1, 2).

    ``factors`` holds (shape, scale, orientation, x, y) indices on a grid of ``sizes`` values each.
    """
    if split not in RECOMBINATION_CASES or case not in range(3):
        raise LitlabError(f"unknown recombination split {split!r} case {case}: use split=r2e|r2r, case=0|1|2")
    mask = np.ones(len(factors), dtype=bool)
    for name, (lo, hi) in RECOMBINATION_CASES[split][case].items():
        j = FACTORS.index(name)
        position = factors[:, j] / sizes[j]
        mask &= (position >= lo / DSPRITES_SIZES[j]) & (position < hi / DSPRITES_SIZES[j])
    return mask


def load_real(source: str, root: str | None) -> tuple[np.ndarray, np.ndarray, tuple[int, ...]]:
    """Images (n, C, H, W) uint8, factor indices (n, f) and factor sizes of a real CG benchmark file.

    dSprites keeps its 5 factors (colour dropped); 3D Shapes and MPI3D map their first five factors onto
    the R2E/R2R masks in order, which is our reconstruction (the paper's masks for them are not given).
    """
    name = REAL_FILES.get(source)
    if name is None:
        raise LitlabError(f"unknown data source {source!r}: use procedural, dsprites, shapes3d or mpi3d")
    folder = find_data("sprites", name, root)
    if folder is None:
        raise LitlabError(
            f"{name} not found in data.root or $LITLAB_DATA_ROOT/sprites; "
            "download it there (dSprites: github.com/google-deepmind/dsprites-dataset, 3D Shapes: "
            "github.com/google-deepmind/3d-shapes, MPI3D: github.com/rr-learning/disentanglement_dataset) "
            "or use data.source=procedural"
        )
    path = folder / name
    if source == "dsprites":
        with np.load(path, allow_pickle=False) as stored:
            images, classes = stored["imgs"][:, None], stored["latents_classes"][:, 1:].astype(np.int64)
        return images, classes, DSPRITES_SIZES
    if source == "shapes3d":
        try:
            import h5py
        except ImportError as error:
            raise LitlabError("reading 3dshapes.h5 needs h5py: pip install 'h5py>=3.10'") from error
        with h5py.File(path, "r") as stored:
            images = np.asarray(stored["images"]).transpose(0, 3, 1, 2)
        # floor hue 10, wall hue 10, object hue 10, scale 8, shape 4, orientation 15; row-major in the file
        sizes = (10, 10, 10, 8, 4, 15)
        return images, factor_grid(sizes)[:, :5], sizes[:5]
    with np.load(path, allow_pickle=False) as stored:
        images = stored["images"].reshape(-1, 64, 64, 3).transpose(0, 3, 1, 2)
    sizes = (6, 6, 2, 3, 3, 40, 40)  # colour, shape, size, camera height, background, horizontal, vertical
    return images, factor_grid(sizes)[:, :5], sizes[:5]


class SpritesDataModule(GlobalBatchDataModule):
    """Train on the observed combinations, validate on a random slice of them, test on the held-out ones.

    Batches are ``(image, factors)`` with image float (B, C, H, W) in [0, 1] and factors int64 (B, 5).
    ``test_dataloader`` returns two loaders: held-out combinations (index 0) and the in-distribution
    validation images (index 1), so one test pass scores both.
    """

    def __init__(
        self,
        split: str = "r2r",
        case: int = 0,
        source: str = "procedural",
        root: str | None = None,
        grid: dict | None = None,
        val_fraction: float = 0.1,
        batch_size: int = 128,
        eval_batch_size: int = 256,
        seed: int = 0,
        num_workers: int = 0,
    ) -> None:
        super().__init__(batch_size=batch_size, num_workers=num_workers)
        if not 0.0 < val_fraction < 1.0:
            raise LitlabError(f"data.val_fraction must be in (0, 1), got {val_fraction}")
        self.split, self.case, self.source, self.root = split, case, source, root
        self.grid = SpriteGrid(**(grid or {}))
        self.val_fraction, self.eval_batch_size, self.seed = val_fraction, eval_batch_size, seed
        self.sizes: tuple[int, ...] = self.grid.sizes
        self.sets: dict[str, TensorDataset] = {}
        self.pixel_scale = 1.0

    def setup(self, stage: str | None = None) -> None:
        if self.sets:
            return
        if self.source == "procedural":
            images, factors = procedural_sprites(self.grid)
            images = images[:, None]
        else:
            images, factors, self.sizes = load_real(self.source, self.root)
        held_out = recombination_mask(factors, self.sizes, self.split, self.case)
        if not held_out.any():
            raise LitlabError(
                f"{self.split} case {self.case} holds out no combination on a grid of {self.sizes} values "
                f"per {FACTORS}: its region {RECOMBINATION_CASES[self.split][self.case]} (dSprites indices) "
                "falls between grid points; use a finer grid (e.g. data.grid.n_orientations=8)"
            )
        observed = np.flatnonzero(~held_out)
        order = np.random.default_rng(self.seed).permutation(observed)
        n_val = max(1, int(round(self.val_fraction * len(order))))
        indices = {
            "train": np.sort(order[n_val:]),
            "val": np.sort(order[:n_val]),
            "test": np.flatnonzero(held_out),
        }
        self.pixel_scale = 1.0 if images.max() <= 1 else 255.0
        for name, index in indices.items():
            self.sets[name] = TensorDataset(torch.from_numpy(images[index]), torch.from_numpy(factors[index]))

    @property
    def image_shape(self) -> tuple[int, int, int]:
        """(C, H, W) of the images, after ``setup``."""
        return tuple(self.sets["train"].tensors[0].shape[1:])

    def _to_float(self, batch: list[tuple[torch.Tensor, torch.Tensor]]) -> list[torch.Tensor]:
        """Collate uint8 images (kept as uint8 so real data sets fit in memory) to floats in [0, 1]."""
        images, factors = default_collate(batch)
        return [images.float() / self.pixel_scale, factors]

    def train_dataloader(self) -> DataLoader:
        generator = torch.Generator().manual_seed(self.seed)
        return DataLoader(
            self.sets["train"],
            batch_size=self.per_device_batch_size,
            shuffle=True,
            drop_last=True,
            generator=generator,
            collate_fn=self._to_float,
            num_workers=self.num_workers,
        )

    def _eval_loader(self, name: str) -> DataLoader:
        return DataLoader(
            self.sets[name],
            batch_size=self.eval_batch_size,
            collate_fn=self._to_float,
            num_workers=self.num_workers,
        )

    def val_dataloader(self) -> DataLoader:
        return self._eval_loader("val")

    def test_dataloader(self) -> list[DataLoader]:
        return [self._eval_loader("test"), self._eval_loader("val")]
