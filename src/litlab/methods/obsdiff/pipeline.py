"""Calibrate, prune and judge one DiT: the steps the prune task, the study and the claim test share.

The evaluation set is fixed (seeded noise and balanced labels, ``EVAL_SEED``) and disjoint from every
calibration seed; the dense model's samples and ε̂ trajectory on it are the reference for image and
per-step errors.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import matplotlib.pyplot as plt
import torch
from matplotlib.figure import Figure
from torch import nn

from litlab.datamodules.procedural_images import make_dataset
from litlab.methods.obsdiff.dit import eps_errors, sample
from litlab.methods.obsdiff.evaluation import class_accuracy, image_error, kid
from litlab.methods.obsdiff.prune import Calibrate, PruneReport, PruneSpec, prune_model

EVAL_SEED = 987_654


def noise_and_labels(n: int, n_classes: int, image_size: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Seeded starting noise (n, 3, S, S) and balanced class labels (n,)."""
    generator = torch.Generator().manual_seed(seed)
    noise = torch.randn(n, 3, image_size, image_size, generator=generator)
    return noise, torch.arange(n) % n_classes


def calibrator(
    model: nn.Module, n: int, seed: int, steps: int, guidance: float, batch: int = 64
) -> Calibrate:
    """One full sampling pass of ``model`` over ``n`` seeded calibration (noise, label) pairs."""
    size, classes = int(model.config.sample_size), int(model.config.num_embeds_ada_norm)
    noise, labels = noise_and_labels(n, classes, size, seed)
    labels = labels[torch.randperm(n, generator=torch.Generator().manual_seed(seed))]

    def calibrate(on_step: callable) -> None:
        for start in range(0, n, batch):
            sample(
                model, noise[start : start + batch], labels[start : start + batch], steps, guidance, on_step
            )

    return calibrate


@dataclass
class Reference:
    """The dense model on the evaluation set: noise, labels, samples, ε̂ trajectory, real-image features
    and the classifier's classes of the dense samples."""

    noise: torch.Tensor
    labels: torch.Tensor
    images: torch.Tensor
    trajectory: list[tuple[torch.Tensor, torch.Tensor]]
    real_features: torch.Tensor
    dense_classes: torch.Tensor
    steps: int
    guidance: float


@torch.no_grad()
def reference(model: nn.Module, classifier: nn.Module, n: int, steps: int, guidance: float) -> Reference:
    """Sample the dense model on the fixed evaluation set and embed real images for KID."""
    size, classes = int(model.config.sample_size), int(model.config.num_embeds_ada_norm)
    noise, labels = noise_and_labels(n, classes, size, EVAL_SEED)
    images, trajectory = sample(model, noise, labels, steps, guidance, record=True)
    real, _ = make_dataset(n, classes, size, EVAL_SEED)
    features = classifier.features(real)
    return Reference(
        noise, labels, images, trajectory, features, classifier(images).argmax(-1), steps, guidance
    )


@torch.no_grad()
def judge(model: nn.Module, ref: Reference, classifier: nn.Module) -> tuple[dict[str, float], torch.Tensor]:
    """Metrics of ``model`` against the dense reference, and its samples. ``class_agree``: the fraction of
    samples the classifier puts in the same class as the dense model's sample from the same noise."""
    images, _ = sample(model, ref.noise, ref.labels, ref.steps, ref.guidance)
    eps = eps_errors(model, ref.trajectory, ref.labels, ref.guidance)
    half = len(eps) // 2
    metrics = {
        **image_error(images, ref.images),
        "class_acc": class_accuracy(classifier, images, ref.labels),
        "class_agree": class_accuracy(classifier, images, ref.dense_classes),
        "kid": kid(ref.real_features, classifier.features(images)),
        "eps_mse_early": eps[:half].mean().item(),
        "eps_mse_late": eps[half:].mean().item(),
    }
    return metrics, images


def pruned_copy(
    dense: nn.Module,
    spec: PruneSpec,
    n_calibration: int,
    seed: int,
    steps: int,
    guidance: float,
    patterns: tuple[str, ...] | None = None,
) -> tuple[nn.Module, PruneReport]:
    """A pruned deep copy of ``dense``; calibration runs on the copy (later groups see earlier pruning)."""
    model = copy.deepcopy(dense)
    calibrate = calibrator(model, n_calibration, seed, steps, guidance)
    kwargs = {"patterns": patterns} if patterns else {}
    report = prune_model(model, calibrate, steps, spec, **kwargs)
    return model.eval(), report


def sample_grid(rows: dict[str, torch.Tensor], columns: int = 8) -> Figure:
    """One row of samples per model (same noise and labels across rows)."""
    fig, axes = plt.subplots(len(rows), 1, figsize=(columns * 0.9, len(rows) * 1.1), squeeze=False)
    for ax, (name, images) in zip(axes[:, 0], rows.items()):
        strip = torch.cat(list(images[:columns].cpu()), dim=2).permute(1, 2, 0)
        ax.imshow(((strip + 1) / 2).clamp(0, 1).numpy())
        ax.set_title(name, fontsize=8, loc="left")
        ax.axis("off")
    fig.tight_layout()
    return fig
