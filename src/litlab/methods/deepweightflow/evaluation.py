"""Stage 4: score generated networks without fine-tuning and test them against the memorisation critique
(Zeng et al., 2025): accuracy, ensembles, distance to the nearest training network after alignment, error
overlap with it, and the noise-added and interpolation baselines."""

from __future__ import annotations

import logging
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
import torch

from litlab.core.figures import save_figure
from litlab.core.results import TaskOutput
from litlab.datamodules.weights import ClassificationData, Zoo, classification_data, flatten_params, load_zoo
from litlab.methods.deepweightflow.architectures import batched_logits, build_network
from litlab.methods.deepweightflow.canonical import align_params, align_zoo
from litlab.task import TaskContext

log = logging.getLogger("litlab")
Params = dict[str, torch.Tensor]


@torch.no_grad()
def predictions(arch: dict, params: Params, x: torch.Tensor) -> torch.Tensor:
    """Class probabilities of every stacked network: ``(n, n_samples, classes)``."""
    return batched_logits(build_network(arch).eval(), params, x).softmax(-1)


def ensemble_accuracy(probs: torch.Tensor, y: torch.Tensor, k: int) -> float:
    """Accuracy of the first ``k`` networks' averaged probabilities; ``probs: (n, samples, classes)``."""
    return float((probs[:k].mean(0).argmax(-1) == y).float().mean())


def error_iou(wrong_a: torch.Tensor, wrong_b: torch.Tensor) -> torch.Tensor:
    """|E_a ∩ E_b| / |E_a ∪ E_b| per row of boolean error masks ``(n, samples)`` (1 when both are empty)."""
    union = (wrong_a | wrong_b).sum(1)
    return torch.where(
        union > 0, (wrong_a & wrong_b).sum(1) / union.clamp_min(1), torch.ones_like(union).float()
    )


def align_stack(arch: dict, reference: Params, params: Params) -> Params:
    """Every stacked network permuted onto ``reference`` (one network), so distances are permutation-free."""
    n = len(next(iter(params.values())))
    aligned = [align_params(arch, reference, {k: v[i] for k, v in params.items()}, seed=i) for i in range(n)]
    return {k: torch.stack([a[k] for a in aligned]) for k in params}


def noise_baseline(
    arch: dict,
    params: Params,
    target_accuracy: float,
    data: ClassificationData,
    seed: int = 0,
    iters: int = 14,
) -> tuple[Params, float]:
    """Training networks plus N(0, σ²) noise, σ found by bisection (log scale) so the mean test accuracy
    matches ``target_accuracy``. Returns the noisy networks and σ."""
    generator = torch.Generator().manual_seed(seed)
    noise = {k: torch.randn(v.shape, generator=generator) for k, v in params.items()}

    def noisy(sigma: float) -> Params:
        return {k: v + sigma * noise[k] for k, v in params.items()}

    def accuracy(sigma: float) -> float:
        probs = predictions(arch, noisy(sigma), data.x_test)
        return float((probs.argmax(-1) == data.y_test).float().mean())

    low, high = -6.0, 1.0  # log10 σ
    if accuracy(10**low) <= target_accuracy:
        return noisy(0.0), 0.0
    for _ in range(iters):
        mid = (low + high) / 2
        low, high = (mid, high) if accuracy(10**mid) > target_accuracy else (low, mid)
    return noisy(10**low), 10**low


def interpolation_baseline(params: Params, n: int, seed: int = 0) -> Params:
    """``n`` interpolations (1−α)·θ_i + α·θ_j of random distinct aligned pairs, α ~ U[0.3, 0.7]."""
    generator = torch.Generator().manual_seed(seed)
    count = len(next(iter(params.values())))
    i = torch.randint(0, count, (n,), generator=generator)
    j = (i + torch.randint(1, count, (n,), generator=generator)) % count
    alpha = 0.3 + 0.4 * torch.rand(n, generator=generator)
    return {k: v[i] + alpha.view(-1, *[1] * (v.dim() - 1)) * (v[j] - v[i]) for k, v in params.items()}


def describe(
    arch: dict,
    params: Params,
    train_params: Params,
    train_wrong: torch.Tensor,
    data: ClassificationData,
    ensemble_sizes: tuple[int, ...] = (10, 50, 100),
) -> dict[str, float]:
    """Accuracy (mean, std, min), ensembles, nearest-training-network L2 and error IoU with that network.

    ``params`` and ``train_params`` are aligned to one reference; ``train_wrong: (n_train, samples)``.
    """
    probs = predictions(arch, params, data.x_test)
    wrong = probs.argmax(-1) != data.y_test
    accuracy = 1 - wrong.float().mean(1)
    distance = torch.cdist(flatten_params(params).double(), flatten_params(train_params).double())
    nearest_distance, nearest = distance.min(1)
    row = {
        "n": len(accuracy),
        "acc_mean": float(accuracy.mean()),
        "acc_std": float(accuracy.std()) if len(accuracy) > 1 else 0.0,
        "acc_min": float(accuracy.min()),
        "nn_dist_mean": float(nearest_distance.mean()),
        "nn_dist_min": float(nearest_distance.min()),
        "error_iou_nn": float(error_iou(wrong, train_wrong[nearest]).mean()),
    }
    for k in ensemble_sizes:
        if k <= len(accuracy):
            row[f"ensemble_{k}"] = ensemble_accuracy(probs, data.y_test, k)
    return row


def evaluate_generated(
    zoo: Zoo, generated: dict[str, Zoo], n_train: int, seed: int = 0
) -> tuple[pd.DataFrame, dict[str, torch.Tensor]]:
    """One row per set: held-out real networks, each generated set, and the noise (σ matched to the first
    generated set's accuracy) and interpolation baselines; all aligned to the zoo's reference member."""
    zoo = zoo if zoo.canonical else align_zoo(zoo)
    arch, data = zoo.arch, classification_data(zoo.dataset)
    reference = {k: v[zoo.reference or 0] for k, v in zoo.params.items()}
    train = {k: v[:n_train] for k, v in zoo.params.items()}
    heldout = {k: v[n_train:] for k, v in zoo.params.items()}
    train_wrong = predictions(arch, train, data.x_test).argmax(-1) != data.y_test
    sets = {"heldout_real": heldout}
    for name, gen in generated.items():
        sets[name] = align_stack(arch, reference, gen.params)
    first = next(iter(generated.values()), None)
    n_baseline = len(first) if first is not None else len(zoo) - n_train
    target = float(first.accuracy.mean()) if first is not None else float(zoo.accuracy[n_train:].mean())
    base = {k: v[torch.arange(n_baseline) % n_train] for k, v in train.items()}
    sets["noise_added"], sigma = noise_baseline(arch, base, target, data, seed)
    sets["interpolation"] = interpolation_baseline(train, n_baseline, seed)
    rows = [dict(set=name, **describe(arch, p, train, train_wrong, data)) for name, p in sets.items()]
    frame = pd.DataFrame(rows).set_index("set")
    frame.loc["noise_added", "sigma"] = sigma
    return frame, sets


def evaluate_task(
    ctx: TaskContext, zoo_dir: str, generated: dict[str, str], n_train: int = 100, seed: int = 0
) -> TaskOutput:
    """Stage 4: read the zoo the generators trained on and their ``generated/`` folders; write
    ``evaluation.csv``, ``results.json`` and ``plots/novelty.png``; return the headline numbers."""
    output_dir = ctx.output_dir
    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    zoo = load_zoo(zoo_dir)
    frame, _ = evaluate_generated(zoo, {k: load_zoo(v) for k, v in generated.items()}, n_train, seed)
    frame.to_csv(output_dir / "evaluation.csv")
    log.info("\n%s", frame.to_string(float_format=lambda v: f"{v:.4f}"))
    results = {
        f"{name}/{col}": float(v) for name, row in frame.iterrows() for col, v in row.items() if pd.notna(v)
    }
    results["zoo/acc_mean"] = float(zoo.accuracy[:n_train].mean())
    fig, ax = plt.subplots(figsize=(5.5, 3.6))
    ax.scatter(frame["nn_dist_mean"], frame["acc_mean"])
    for name, row in frame.iterrows():
        ax.annotate(str(name), (row["nn_dist_mean"], row["acc_mean"]), fontsize=8)
    ax.set_xlabel("mean L2 to nearest training network (aligned)")
    ax.set_ylabel("mean test accuracy")
    save_figure(fig, output_dir, "novelty")
    return {"metrics": results}
