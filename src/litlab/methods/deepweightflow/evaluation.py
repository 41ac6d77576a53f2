"""Stage 4: score generated networks without fine-tuning and test them against the memorisation critique
(Zeng et al., 2025): accuracy, ensembles, distance to the nearest training network and to the nearest
interpolation of two training networks (after alignment), error overlap with the nearest network, and
the trivial generators the critique invites: copies of the nearest training network, noise-added training
networks and interpolations of aligned pairs, the last two matched to the generated networks' accuracy."""

from __future__ import annotations

import logging
from collections.abc import Callable

import matplotlib.pyplot as plt
import pandas as pd
import torch
from matplotlib.figure import Figure

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


def mean_accuracy(arch: dict, params: Params, data: ClassificationData) -> float:
    """Mean test accuracy of the stacked networks."""
    return float((predictions(arch, params, data.x_test).argmax(-1) == data.y_test).float().mean())


def ensemble_accuracy(probs: torch.Tensor, y: torch.Tensor, k: int) -> float:
    """Accuracy of the first ``k`` networks' averaged probabilities; ``probs: (n, samples, classes)``."""
    return float((probs[:k].mean(0).argmax(-1) == y).float().mean())


def error_iou(wrong_a: torch.Tensor, wrong_b: torch.Tensor) -> torch.Tensor:
    """|E_a ∩ E_b| / |E_a ∪ E_b| per row of boolean error masks ``(n, samples)`` (1 when both are empty)."""
    union = (wrong_a | wrong_b).sum(1)
    return torch.where(
        union > 0, (wrong_a & wrong_b).sum(1) / union.clamp_min(1), torch.ones_like(union).float()
    )


def l2_distances(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """``(n, m)`` Euclidean distances in float64 by direct differences (exactly 0 for a copy)."""
    return torch.cdist(x.double(), y.double(), compute_mode="donot_use_mm_for_euclid_dist")


def segment_distance(x: torch.Tensor, train: torch.Tensor) -> torch.Tensor:
    """Distance from each row of ``x: (n, d)`` to the nearest segment [θ_i, θ_j] between two distinct
    rows of ``train: (m, d)``: 0 for an interpolation of two training networks (or a copy of one).

    From inner products only: with u = x − θ_i, w = θ_j − θ_i, the closest point is θ_i + τw,
    τ = clamp(⟨u, w⟩/‖w‖², 0, 1), and the squared distance is ‖u‖² − 2τ⟨u, w⟩ + τ²‖w‖². ``(n,)``.
    """
    x, train = x.double(), train.double()
    xx, tt, xt = x.square().sum(1), train.square().sum(1), x @ train.T  # (n,), (m,), (n, m)
    gram = train @ train.T  # (m, m)
    uu = (xx[:, None] - 2 * xt + tt)[:, :, None]  # ‖x − θ_i‖²: (n, m, 1)
    uw = xt[:, None, :] - xt[:, :, None] - gram[None] + tt[None, :, None]  # ⟨x − θ_i, θ_j − θ_i⟩
    ww = (tt[:, None] + tt[None] - 2 * gram)[None]  # ‖θ_j − θ_i‖²: (1, m, m)
    tau = (uw / ww.clamp_min(1e-30)).clamp(0, 1)
    squared = uu - 2 * tau * uw + tau.square() * ww
    squared = squared + torch.eye(len(train), dtype=squared.dtype) * torch.finfo(squared.dtype).max / 4
    return squared.flatten(1).min(1).values.clamp_min(0).sqrt()


def align_stack(arch: dict, reference: Params, params: Params) -> Params:
    """Every stacked network permuted onto ``reference`` (one network), so distances are permutation-free."""
    n = len(next(iter(params.values())))
    aligned = [align_params(arch, reference, {k: v[i] for k, v in params.items()}, seed=i) for i in range(n)]
    return {k: torch.stack([a[k] for a in aligned]) for k in params}


def match_accuracy(
    make: Callable[[float], Params],
    accuracy: Callable[[Params], float],
    target: float,
    low: float,
    high: float,
    iters: int = 14,
) -> float:
    """The knob in [low, high] at which ``accuracy(make(knob))`` crosses ``target`` (bisection; accuracy
    falls as the knob grows). Returns ``low`` if even ``low`` is at or under the target, ``high`` if even
    ``high`` is above it."""
    if accuracy(make(low)) <= target:
        return low
    if accuracy(make(high)) > target:
        return high
    for _ in range(iters):
        mid = (low + high) / 2
        low, high = (mid, high) if accuracy(make(mid)) > target else (low, mid)
    return low


def noise_baseline(
    arch: dict, params: Params, target_accuracy: float, data: ClassificationData, seed: int = 0
) -> tuple[Params, float]:
    """Training networks plus N(0, σ²) noise, σ found by bisection (on log10 σ) so that the mean test
    accuracy matches ``target_accuracy``. Returns the noisy networks and σ."""
    generator = torch.Generator().manual_seed(seed)
    noise = {k: torch.randn(v.shape, generator=generator) for k, v in params.items()}

    def noisy(log_sigma: float) -> Params:
        return {k: v + 10**log_sigma * noise[k] for k, v in params.items()}

    log_sigma = match_accuracy(noisy, lambda p: mean_accuracy(arch, p, data), target_accuracy, -6.0, 1.0)
    return noisy(log_sigma), 10**log_sigma


def interpolation_baseline(
    params: Params, n: int, seed: int = 0, alpha: tuple[float, float] = (0.3, 0.7)
) -> Params:
    """``n`` interpolations (1−α)·θ_i + α·θ_j of random distinct aligned pairs, α ~ U[alpha]."""
    generator = torch.Generator().manual_seed(seed)
    count = len(next(iter(params.values())))
    i = torch.randint(0, count, (n,), generator=generator)
    j = (i + torch.randint(1, count, (n,), generator=generator)) % count
    a = alpha[0] + (alpha[1] - alpha[0]) * torch.rand(n, generator=generator)
    return {k: v[i] + a.view(-1, *[1] * (v.dim() - 1)) * (v[j] - v[i]) for k, v in params.items()}


def matched_interpolation(
    arch: dict, params: Params, n: int, target_accuracy: float, data: ClassificationData, seed: int = 0
) -> tuple[Params, float]:
    """Interpolations of aligned pairs at one α ∈ [0, 0.5] (bisection) whose mean test accuracy matches
    ``target_accuracy``: the critique's weight-averaging baseline at the generator's accuracy."""

    def mixed(alpha: float) -> Params:
        return interpolation_baseline(params, n, seed, (alpha, alpha))

    alpha = match_accuracy(mixed, lambda p: mean_accuracy(arch, p, data), target_accuracy, 0.0, 0.5)
    return mixed(alpha), alpha


def nearest_copies(params: Params, train_params: Params) -> Params:
    """Each network replaced by its nearest training network: what a generator that only memorises gives."""
    nearest = l2_distances(flatten_params(params), flatten_params(train_params)).argmin(1)
    return {k: v[nearest] for k, v in train_params.items()}


def describe(
    arch: dict,
    params: Params,
    train_params: Params,
    train_wrong: torch.Tensor,
    data: ClassificationData,
    ensemble_sizes: tuple[int, ...] = (10, 50, 100),
) -> dict[str, float]:
    """Accuracy (mean, std, min), ensembles, L2 to the nearest training network and to the nearest
    training pair's segment, error IoU with the nearest network.

    ``params`` and ``train_params`` are aligned to one reference; ``train_wrong: (n_train, samples)``.
    """
    probs = predictions(arch, params, data.x_test)
    wrong = probs.argmax(-1) != data.y_test
    accuracy = 1 - wrong.float().mean(1)
    flat, train_flat = flatten_params(params), flatten_params(train_params)
    nearest_distance, nearest = l2_distances(flat, train_flat).min(1)
    segment = segment_distance(flat, train_flat)
    row = {
        "n": len(accuracy),
        "acc_mean": float(accuracy.mean()),
        "acc_std": float(accuracy.std()) if len(accuracy) > 1 else 0.0,
        "acc_min": float(accuracy.min()),
        "nn_dist_mean": float(nearest_distance.mean()),
        "nn_dist_min": float(nearest_distance.min()),
        "seg_dist_mean": float(segment.mean()),
        "seg_dist_min": float(segment.min()),
        "error_iou_nn": float(error_iou(wrong, train_wrong[nearest]).mean()),
    }
    for k in ensemble_sizes:
        if k <= len(accuracy):
            row[f"ensemble_{k}"] = ensemble_accuracy(probs, data.y_test, k)
    return row


def evaluate_generated(
    zoo: Zoo, generated: dict[str, Zoo], n_train: int, seed: int = 0
) -> tuple[pd.DataFrame, dict[str, Params]]:
    """One row per set, all aligned to the zoo's reference member: held-out real networks, each generated
    set and the baselines built for the first generated set: its nearest training networks
    (``nearest_copy``), noise-added networks and interpolations matched to its accuracy
    (``noise_added``, ``interpolation_matched``), and interpolations at α ~ U[0.3, 0.7]."""
    zoo = zoo if zoo.canonical else align_zoo(zoo)
    arch, data = zoo.arch, classification_data(zoo.dataset)
    reference = {k: v[zoo.reference or 0] for k, v in zoo.params.items()}
    train = {k: v[:n_train] for k, v in zoo.params.items()}
    train_wrong = predictions(arch, train, data.x_test).argmax(-1) != data.y_test
    sets = {"heldout_real": {k: v[n_train:] for k, v in zoo.params.items()}}
    for name, gen in generated.items():
        sets[name] = align_stack(arch, reference, gen.params)
    first = next(iter(generated), None)
    n_baseline = len(generated[first]) if first is not None else len(zoo) - n_train
    target = mean_accuracy(arch, sets[first], data) if first is not None else float(zoo.accuracy.mean())
    if first is not None:
        sets["nearest_copy"] = nearest_copies(sets[first], train)
    base = {k: v[torch.arange(n_baseline) % n_train] for k, v in train.items()}
    sets["noise_added"], sigma = noise_baseline(arch, base, target, data, seed)
    sets["interpolation_matched"], alpha = matched_interpolation(arch, train, n_baseline, target, data, seed)
    sets["interpolation"] = interpolation_baseline(train, n_baseline, seed)
    rows = [dict(set=name, **describe(arch, p, train, train_wrong, data)) for name, p in sets.items()]
    frame = pd.DataFrame(rows).set_index("set")
    frame["knob"] = float("nan")  # the baseline's matched σ or α
    frame.loc["noise_added", "knob"] = sigma
    frame.loc["interpolation_matched", "knob"] = alpha
    return frame, sets


def novelty_figure(frame: pd.DataFrame) -> Figure:
    """Mean accuracy against mean distance to the nearest training network, one point per set."""
    fig, ax = plt.subplots(figsize=(5.5, 3.6))
    ax.scatter(frame["nn_dist_mean"], frame["acc_mean"])
    for name, row in frame.iterrows():
        ax.annotate(str(name), (row["nn_dist_mean"], row["acc_mean"]), fontsize=8)
    ax.set_xlabel("mean L2 to nearest training network (aligned)")
    ax.set_ylabel("mean test accuracy")
    return fig


def evaluate_task(
    ctx: TaskContext, zoo_dir: str, generated: dict[str, str], n_train: int = 100, seed: int = 0
) -> TaskOutput:
    """Stage 4: read the zoo the generators trained on and their ``generated/`` folders; return the
    ``evaluation`` table (one row per set), its numbers as metrics and the ``novelty`` plot."""
    zoo = load_zoo(zoo_dir)
    frame, _ = evaluate_generated(zoo, {k: load_zoo(v) for k, v in generated.items()}, n_train, seed)
    log.info("\n%s", frame.to_string(float_format=lambda v: f"{v:.4f}"))
    metrics = {
        f"{name}/{col}": float(v) for name, row in frame.iterrows() for col, v in row.items() if pd.notna(v)
    }
    metrics["zoo/acc_mean"] = float(zoo.accuracy[:n_train].mean())
    return {
        "metrics": metrics,
        "tables": {"evaluation": frame.reset_index()},
        "figures": {"novelty": novelty_figure(frame)},
    }
