"""Accuracy, calibration and selection scores of predictive distributions given as Gaussian mixtures.

A predictive distribution for y_i is the mixture (1/S) sum_s N(mean[s, i], sigma[s]^2): posterior draws of
Bayesian-TPNN or BART (S draws), or a plug-in Gaussian (S = 1).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import torch

SQRT2 = math.sqrt(2.0)


def _normal_cdf(z: torch.Tensor) -> torch.Tensor:
    return 0.5 * (1 + torch.erf(z / SQRT2))


def _a(mu: torch.Tensor, var: torch.Tensor) -> torch.Tensor:
    """E|X| for X ~ N(mu, var): mu (2 Phi(mu/sd) - 1) + 2 sd phi(mu/sd)."""
    sd = var.sqrt()
    z = mu / sd
    return mu * (2 * _normal_cdf(z) - 1) + 2 * sd * torch.exp(-0.5 * z**2) / math.sqrt(2 * math.pi)


def mixture_crps(mean: torch.Tensor, sigma: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """CRPS of each y_i under the equal-weight Gaussian mixture (closed form, Grimit et al. 2006): (n,).

    CRPS = E|X - y| - 1/2 E|X - X'| with X, X' independent draws of the mixture; ``mean: (S, n)``,
    ``sigma: (S,)``, ``y: (n,)``. The S x S pair term is taken over chunks of points (memory S^2 chunk).
    """
    mean, sigma, y = mean.double(), sigma.double(), y.double()
    var = sigma.square()
    first = _a(y - mean, var[:, None].expand_as(mean)).mean(0)
    pair_var = (var[:, None] + var[None, :])[:, :, None]
    chunk = max(1, 2_000_000 // mean.shape[0] ** 2)
    second = []
    for i in range(0, mean.shape[1], chunk):
        block = mean[:, i : i + chunk]
        diff = block[:, None, :] - block[None, :, :]
        second.append(_a(diff, pair_var.expand_as(diff)).mean((0, 1)))
    return first - 0.5 * torch.cat(second)


def mixture_cdf(mean: torch.Tensor, sigma: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """F_i(y_i) (the probability integral transform) under each point's mixture: (n,)."""
    return _normal_cdf((y.double() - mean.double()) / sigma.double()[:, None]).mean(0)


def mixture_quantiles(
    mean: torch.Tensor, sigma: torch.Tensor, levels: Sequence[float], steps: int = 60
) -> torch.Tensor:
    """Quantiles of each point's mixture at ``levels`` by bisection on its CDF: (len(levels), n)."""
    mean, sigma = mean.double(), sigma.double()
    spread = 10 * sigma.max()
    low = (mean.min(0).values - spread).expand(len(levels), -1).clone()
    high = (mean.max(0).values + spread).expand(len(levels), -1).clone()
    target = torch.tensor(levels, dtype=torch.float64)[:, None]
    for _ in range(steps):
        middle = 0.5 * (low + high)
        below = _normal_cdf((middle[:, None, :] - mean[None]) / sigma[None, :, None]).mean(1) < target
        low, high = torch.where(below, middle, low), torch.where(below, high, middle)
    return 0.5 * (low + high)


def calibration_error(
    pit: torch.Tensor, levels: Iterable[float] = tuple(i / 20 for i in range(1, 20))
) -> float:
    """Mean over levels q of |P(F(y) <= q) - q| (the regression calibration error of Kuleshov et al. 2018)."""
    return float(sum(abs(float((pit <= q).double().mean()) - q) for q in levels) / len(tuple(levels)))


def predictive_scores(
    mean: torch.Tensor, sigma: torch.Tensor, y: torch.Tensor, level: float = 0.9
) -> dict[str, float]:
    """RMSE of the mixture mean, mean CRPS, calibration error, and coverage/width of the central interval."""
    y = y.double()
    point = mean.double().mean(0)
    lower, upper = mixture_quantiles(mean, sigma, [(1 - level) / 2, (1 + level) / 2])
    return {
        "rmse": float((point - y).square().mean().sqrt()),
        "crps": float(mixture_crps(mean, sigma, y).mean()),
        "ece": calibration_error(mixture_cdf(mean, sigma, y)),
        "coverage": float(((y >= lower) & (y <= upper)).double().mean()),
        "width": float((upper - lower).mean()),
    }


def selection_auroc(
    scores: dict[tuple[int, ...], float], truth: Iterable[tuple[int, ...]], p: int, order: int
) -> float:
    """AUROC of ranking all C(p, order) subsets of one order by ``scores`` (absent: 0) against ``truth``.

    Ties count one half. NaN when the order has no true subset or no false one.
    """
    positives = {tuple(sorted(s)) for s in truth if len(s) == order}
    total = math.comb(p, order)
    if not positives or len(positives) == total:
        return math.nan
    pos = [scores.get(s, 0.0) for s in positives]
    listed = [v for s, v in scores.items() if len(s) == order and s not in positives]
    unlisted = total - len(positives) - len(listed)  # negatives never sampled: score 0
    wins = 0.0
    for v in pos:
        wins += sum(1.0 if v > w else 0.5 if v == w else 0.0 for w in listed)
        wins += unlisted * (1.0 if v > 0 else 0.5)
    return wins / (len(pos) * (total - len(positives)))
