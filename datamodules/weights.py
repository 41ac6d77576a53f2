"""The weights family: small classification sets a zoo is trained on, model zoos stored as safetensors
plus a JSON index, and a DataModule serving flattened (optionally PCA-reduced) network weights."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file
from torch.utils.data import DataLoader, TensorDataset

from litlab.core.errors import LitlabError
from litlab.datamodules.base import GlobalBatchDataModule

WEIGHTS_FILE = "weights.safetensors"
INDEX_FILE = "index.json"
DATASETS = ("digits", "iris")


@dataclass(frozen=True)
class ClassificationData:
    """A fixed stratified train/test split: ``x_*: (n, n_features)`` float32, ``y_*: (n,)`` int64."""

    x_train: torch.Tensor
    y_train: torch.Tensor
    x_test: torch.Tensor
    y_test: torch.Tensor
    n_classes: int


def classification_data(name: str, test_fraction: float = 0.25, seed: int = 0) -> ClassificationData:
    """sklearn's ``digits`` (8x8 images scaled to [0, 1], 64 features) or ``iris`` (standardised, 4)."""
    from sklearn import datasets
    from sklearn.model_selection import train_test_split

    if name not in DATASETS:
        raise LitlabError(f"unknown zoo dataset {name!r}; choose one of {', '.join(DATASETS)}")
    bunch = datasets.load_digits() if name == "digits" else datasets.load_iris()
    x = torch.as_tensor(bunch.data, dtype=torch.float32)
    y = torch.as_tensor(bunch.target, dtype=torch.int64)
    train, test = train_test_split(
        torch.arange(len(y)).numpy(), test_size=test_fraction, random_state=seed, stratify=y.numpy()
    )
    train, test = torch.as_tensor(train), torch.as_tensor(test)
    x = x / 16.0 if name == "digits" else (x - x[train].mean(0)) / x[train].std(0)
    return ClassificationData(x[train], y[train], x[test], y[test], int(y.max()) + 1)


@dataclass
class Zoo:
    """A population of networks of one architecture: every entry of ``params`` is stacked, ``(n, ...)``.

    ``params`` holds parameters and buffers (state-dict names); ``arch`` rebuilds the network
    (see ``litlab.methods.deepweightflow.architectures``); ``canonical`` marks a zoo aligned to member
    ``reference``, which is left unchanged.
    """

    params: dict[str, torch.Tensor]
    arch: dict
    dataset: str
    seeds: list[int]
    accuracy: torch.Tensor
    canonical: bool = False
    reference: int | None = None
    extra: dict = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.seeds)

    def subset(self, index: torch.Tensor) -> Zoo:
        """The members at ``index`` (a 1-D long tensor), metadata kept."""
        return Zoo(
            {k: v[index] for k, v in self.params.items()},
            self.arch,
            self.dataset,
            [self.seeds[i] for i in index.tolist()],
            self.accuracy[index],
            self.canonical,
            self.reference,
            dict(self.extra),
        )


def save_zoo(zoo: Zoo, folder: str | Path) -> Path:
    """Write ``weights.safetensors`` (stacked tensors) and ``index.json`` (architecture, per-network
    seed and accuracy) into ``folder``; returns the folder."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    save_file({k: v.contiguous() for k, v in zoo.params.items()}, str(folder / WEIGHTS_FILE))
    index = {
        "arch": zoo.arch,
        "dataset": zoo.dataset,
        "canonical": zoo.canonical,
        "reference": zoo.reference,
        "extra": zoo.extra,
        "networks": [
            {"index": i, "seed": s, "accuracy": float(a)}
            for i, (s, a) in enumerate(zip(zoo.seeds, zoo.accuracy))
        ],
    }
    (folder / INDEX_FILE).write_text(json.dumps(index, indent=1))
    return folder


def load_zoo(folder: str | Path) -> Zoo:
    """Read a zoo written by ``save_zoo`` (a folder with ``index.json`` and ``weights.safetensors``)."""
    folder = Path(folder)
    if not (folder / INDEX_FILE).is_file() or not (folder / WEIGHTS_FILE).is_file():
        raise LitlabError(
            f"no zoo in {folder}: expected {INDEX_FILE} and {WEIGHTS_FILE}. Build one with "
            "`litlab-run task=deepweightflow/zoo` and pass its run folder's zoo/ path."
        )
    index = json.loads((folder / INDEX_FILE).read_text())
    params = load_file(str(folder / WEIGHTS_FILE))
    networks = index["networks"]
    return Zoo(
        params,
        index["arch"],
        index["dataset"],
        [n["seed"] for n in networks],
        torch.tensor([n["accuracy"] for n in networks]),
        index.get("canonical", False),
        index.get("reference"),
        index.get("extra", {}),
    )


def flatten_params(params: dict[str, torch.Tensor]) -> torch.Tensor:
    """Stacked ``{name: (n, ...)}`` -> ``(n, d)``, entries in sorted-name order."""
    return torch.cat([params[k].flatten(1) for k in sorted(params)], dim=1)


def unflatten_params(flat: torch.Tensor, shapes: dict[str, tuple[int, ...]]) -> dict[str, torch.Tensor]:
    """Inverse of ``flatten_params``: ``(n, d)`` -> ``{name: (n, *shape)}`` given per-network shapes."""
    out, start = {}, 0
    for name in sorted(shapes):
        size = int(torch.Size(shapes[name]).numel())
        out[name] = flat[:, start : start + size].reshape(len(flat), *shapes[name])
        start += size
    if start != flat.shape[1]:
        raise LitlabError(f"flat weights have {flat.shape[1]} entries but the architecture needs {start}")
    return out


class PCA(torch.nn.Module):
    """x ≈ mean + z @ components, fitted by SVD of the centred ``(n, d)`` matrix (the paper's option
    for large nets; with n < d this equals the dual, Gram-matrix PCA). ``components: (k, d)``."""

    def __init__(self, x: torch.Tensor, n_components: int) -> None:
        super().__init__()
        if not 0 < n_components <= min(x.shape):
            raise LitlabError(
                f"pca_components={n_components} must be in 1..{min(x.shape)} for {tuple(x.shape)}"
            )
        mean = x.mean(0)
        _, s, vh = torch.linalg.svd(x - mean, full_matrices=False)
        self.register_buffer("mean", mean)
        self.register_buffer("components", vh[:n_components])
        self.explained = float(s[:n_components].square().sum() / s.square().sum().clamp_min(1e-30))

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        """``(n, d) -> (n, k)``."""
        return (x - self.mean) @ self.components.T

    def decode(self, z: torch.Tensor) -> torch.Tensor:
        """``(n, k) -> (n, d)``."""
        return self.mean + z @ self.components


@dataclass
class WeightSpace:
    """What a generator needs besides the vectors: the zoo split, shapes to unflatten, the optional PCA
    and the evaluation data of the task the networks solve."""

    train: Zoo
    heldout: Zoo
    shapes: dict[str, tuple[int, ...]]
    pca: PCA | None
    data: ClassificationData

    def encode(self, params: dict[str, torch.Tensor]) -> torch.Tensor:
        flat = flatten_params(params)
        return flat if self.pca is None else self.pca.encode(flat)

    def decode(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        flat = x if self.pca is None else self.pca.decode(x)
        return unflatten_params(flat, self.shapes)

    @property
    def dim(self) -> int:
        return self.encode({k: v[:1] for k, v in self.train.params.items()}).shape[1]


class WeightsDataModule(GlobalBatchDataModule):
    """Flattened weights of a zoo's first ``n_train`` members as training vectors; the rest are held out
    (their vectors are the validation set). The test loader serves the zoo task's test split, on which a
    generator scores the networks it samples.

    ``zoo`` is a zero-argument callable returning a ``Zoo`` (a Hydra partial: load a folder, or build and
    cache a small seeded zoo), so the experiment runs on a clean checkout.
    """

    def __init__(
        self,
        zoo: Callable[[], Zoo],
        n_train: int = 100,
        pca_components: int | None = None,
        batch_size: int = 8,
        eval_batch_size: int = 512,
        num_workers: int = 0,
    ) -> None:
        super().__init__(batch_size, num_workers)
        self.zoo_factory = zoo
        self.n_train = n_train
        self.pca_components = pca_components
        self.eval_batch_size = eval_batch_size
        self.space: WeightSpace | None = None

    def setup(self, stage: str | None = None) -> None:
        if self.space is not None:
            return
        zoo = self.zoo_factory()
        if not 0 < self.n_train < len(zoo):
            raise LitlabError(
                f"data.n_train={self.n_train} must be in 1..{len(zoo) - 1} for a zoo of {len(zoo)}"
            )
        train = zoo.subset(torch.arange(self.n_train))
        heldout = zoo.subset(torch.arange(self.n_train, len(zoo)))
        shapes = {k: tuple(v.shape[1:]) for k, v in zoo.params.items()}
        flat = flatten_params(train.params)
        pca = None if self.pca_components is None else PCA(flat, self.pca_components)
        self.space = WeightSpace(train, heldout, shapes, pca, classification_data(zoo.dataset))

    def data_spec(self) -> dict[str, Any]:
        """What a generator needs before training: the vector size and the :class:`WeightSpace` (zoo
        split, shapes, PCA, the task's data). Builds the zoo if needed; ``setup`` then reuses it."""
        self.setup()
        assert self.space is not None
        return {"dim": self.space.dim, "space": self.space}

    def _vectors(self, zoo: Zoo) -> TensorDataset:
        assert self.space is not None
        return TensorDataset(self.space.encode(zoo.params).float())

    def train_dataloader(self) -> DataLoader:
        assert self.space is not None
        return DataLoader(
            self._vectors(self.space.train),
            batch_size=self.per_device_batch_size,
            shuffle=True,
            drop_last=len(self.space.train) >= self.per_device_batch_size,
            num_workers=self.num_workers,
        )

    def val_dataloader(self) -> DataLoader:
        assert self.space is not None
        return DataLoader(self._vectors(self.space.heldout), batch_size=self.eval_batch_size)

    def test_dataloader(self) -> DataLoader:
        assert self.space is not None
        data = self.space.data
        return DataLoader(TensorDataset(data.x_test, data.y_test), batch_size=self.eval_batch_size)
