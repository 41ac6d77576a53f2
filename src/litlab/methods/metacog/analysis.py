"""Does the subject's own confidence signal predict delegation beyond what the question looks like?

Logistic regression of the delegate choice on the self signal s (capabilities correctness, or the max
option probability / entropy where the backend gives log-probs) with surface-difficulty controls (operand
digits as categories, operation, log question length) and teammate accuracy, fitted by Newton-IRLS with
Wald standard errors; percentile bootstrap intervals from a batch of fits on resampled trials. Neither
statsmodels nor an unpenalised scikit-learn fit gives standard errors and batched bootstraps, so the fit is
here (checked against scikit-learn's coefficients and an autograd Hessian in the tests).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from litlab.core.errors import LitlabError


@dataclass
class LogitFit:
    """Coefficients ``(k,)``, their Wald standard errors, z and two-sided p values, in ``names`` order."""

    names: list[str]
    coef: np.ndarray
    se: np.ndarray
    converged: bool

    @property
    def z(self) -> np.ndarray:
        return self.coef / self.se

    @property
    def p(self) -> np.ndarray:
        return np.array([math.erfc(abs(z) / math.sqrt(2)) for z in self.z])

    def row(self, name: str) -> dict[str, float]:
        i = self.names.index(name)
        return {
            "coef": float(self.coef[i]),
            "se": float(self.se[i]),
            "z": float(self.z[i]),
            "p": float(self.p[i]),
        }


def irls(
    x: np.ndarray, y: np.ndarray, weights: np.ndarray | None = None, ridge: float = 1e-6, steps: int = 50
) -> tuple[np.ndarray, np.ndarray, bool]:
    """Batched Newton-IRLS for logistic regression.

    x: (n, k) design (with its intercept column); y: (n,) 0/1; weights: (B, n) frequency weights (B fits at
    once, default one fit of weight 1). ``ridge`` adds ridge·I to each Hessian (keeps separated data finite;
    negligible otherwise). Returns coefficients (B, k), inverse Hessians (B, k, k), converged.
    """
    w = np.ones((1, len(y))) if weights is None else np.atleast_2d(weights)
    beta = np.zeros((w.shape[0], x.shape[1]))
    eye = ridge * np.eye(x.shape[1])
    converged = False
    for _ in range(steps):
        p = 1 / (1 + np.exp(-(beta @ x.T)))
        grad = ((w * (y - p)) @ x) - ridge * beta
        hess = np.einsum("bn,ni,nj->bij", w * p * (1 - p), x, x) + eye
        step = np.linalg.solve(hess, grad[..., None])[..., 0]
        beta = beta + step
        if np.abs(step).max() < 1e-8:
            converged = True
            break
    p = 1 / (1 + np.exp(-(beta @ x.T)))
    hess = np.einsum("bn,ni,nj->bij", w * p * (1 - p), x, x) + eye
    return beta, np.linalg.inv(hess), converged


def logit(x: np.ndarray, y: np.ndarray, names: list[str]) -> LogitFit:
    """One logistic fit with Wald standard errors."""
    beta, cov, converged = irls(x, y)
    return LogitFit(names, beta[0], np.sqrt(np.diag(cov[0])), converged)


def bootstrap(
    x: np.ndarray, y: np.ndarray, column: int, n_boot: int, seed: int, level: float = 0.95
) -> tuple[float, float]:
    """Percentile interval of coefficient ``column`` over ``n_boot`` row resamples (one batched fit)."""
    rng = np.random.default_rng(seed)
    counts = rng.multinomial(len(y), np.full(len(y), 1 / len(y)), size=n_boot).astype(float)
    beta, _, _ = irls(x, y, counts)
    low, high = np.quantile(beta[:, column], [(1 - level) / 2, (1 + level) / 2])
    return float(low), float(high)


def standardise(v: np.ndarray) -> np.ndarray:
    """Zero mean, unit sd (a constant column stays 0)."""
    sd = v.std()
    return (v - v.mean()) / sd if sd > 0 else v - v.mean()


def design(
    signal: np.ndarray, controls: Mapping[str, np.ndarray], digits: np.ndarray | None
) -> tuple[np.ndarray, list[str]]:
    """``(n, k)`` design: intercept, the standardised signal, standardised continuous ``controls`` and, if
    given, one indicator per operand-digit level but the first (digits as categories, so a nonlinear
    "looks hard" rule is absorbed by the controls)."""
    columns, names = (
        [np.ones_like(signal, dtype=float), standardise(signal.astype(float))],
        ["const", "signal"],
    )
    for name, v in controls.items():
        if np.ptp(v) > 0:
            columns.append(standardise(v.astype(float)))
            names.append(name)
    if digits is not None:
        for level in np.unique(digits)[1:]:
            columns.append((digits == level).astype(float))
            names.append(f"digits={level}")
    return np.stack(columns, 1), names


def delegation_regression(
    delegated: np.ndarray,
    signal: np.ndarray,
    surface: Mapping[str, np.ndarray],
    digits: np.ndarray | None,
    n_boot: int = 300,
    seed: int = 0,
) -> dict[str, float]:
    """The self-signal effect on delegation after the controls: coefficient (per sd of the signal), its
    standard error, z, p and bootstrap interval; ``surface``/``digits`` empty/None = no controls."""
    keep = np.isfinite(signal)
    if keep.sum() < 10 or len(np.unique(delegated[keep])) < 2:
        raise LitlabError(
            f"delegation regression needs >= 10 trials with both choices; got {int(keep.sum())} trials"
        )
    x, names = design(
        signal[keep], {k: v[keep] for k, v in surface.items()}, None if digits is None else digits[keep]
    )
    y = delegated[keep].astype(float)
    fit = logit(x, y, names)
    low, high = bootstrap(x, y, 1, n_boot, seed) if n_boot else (float("nan"), float("nan"))
    return {
        **fit.row("signal"),
        "ci_low": low,
        "ci_high": high,
        "n": int(keep.sum()),
        "delegation_rate": float(y.mean()),
        "converged": float(fit.converged),
    }
