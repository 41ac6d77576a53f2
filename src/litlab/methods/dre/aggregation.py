"""The paper's aggregation of K candidate ratio models, and the baselines it is compared with.

Aggregation (Gruber et al., ICLR 2026): minimise ‖Σ_k α_k f_k − f_H‖² in the Hessian-weighted norm
⟨u, v⟩_H = mean_P ℓ''(+1, f_ref) u v + mean_Q ℓ''(−1, f_ref) u v of a reference model f_ref. Its closed
form is α̂ = (Ĝ + δ·diag Ĝ)⁻¹ r̂ with Ĝ_kj = ⟨f_k, f_j⟩_H and, from one Newton step of the risk at f_ref,
r̂_k = ⟨f_k, f_ref⟩_H − (mean_P ℓ'(+1, f_ref) f_k + mean_Q ℓ'(−1, f_ref) f_k). For KuLSIF the step is exact
and f_ref drops out: Ĝ_kj = mean_Q f_k f_j, r̂_k = mean_P f_k (LSIF over the span of the candidates).
The choice of f_ref (the uniform mean) and the jitter's form and size (δ = 1e-3, relative to each
candidate's own Hessian norm) are ours; so is cross-fitting (:mod:`~litlab.methods.dre.compare`).

Baselines take held-out risks or out-of-fold predictions from :mod:`~litlab.methods.dre.selection`.
"""

from __future__ import annotations

import numpy as np
import torch
from scipy.optimize import nnls

from litlab.core.errors import ConfigError
from litlab.methods.dre.losses import BregmanLoss


def hessian_system(
    loss: BregmanLoss, f_p: torch.Tensor, f_q: torch.Tensor, ref_p: torch.Tensor, ref_q: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """(Ĝ, r̂) at reference values ``ref_p: (M,)``, ``ref_q: (N,)`` for candidates ``f_p: (K, M)``,
    ``f_q: (K, N)``; Ĝ is ``(K, K)``, r̂ ``(K,)``."""
    w_p = loss.dd_pos(ref_p) / f_p.shape[1]
    w_q = loss.dd_neg(ref_q) / f_q.shape[1]
    gram = (f_p * w_p) @ f_p.T + (f_q * w_q) @ f_q.T
    target = (f_p * w_p) @ ref_p + (f_q * w_q) @ ref_q
    gradient = f_p @ loss.d_pos(ref_p) / f_p.shape[1] + f_q @ loss.d_neg(ref_q) / f_q.shape[1]
    return gram, target - gradient


def solve_weights(gram: torch.Tensor, target: torch.Tensor, jitter: float) -> torch.Tensor:
    """α = (Ĝ + δ·diag Ĝ)⁻¹ r̂: the jitter is relative to each candidate's own Hessian norm, so it does not
    depend on how the candidates are scaled (Ĝ is singular when candidates nearly coincide)."""
    diagonal = gram.diagonal().clamp_min(torch.finfo(gram.dtype).tiny)
    return torch.linalg.solve(gram + torch.diag(jitter * diagonal), target)


def reference_values(loss: BregmanLoss, f: torch.Tensor, reference: str) -> torch.Tensor:
    """f_ref at the rows of ``f: (K, n)``: the candidates' uniform ``mean``, or the ``constant`` β ≡ 1."""
    if reference == "mean":
        return f.mean(0)
    if reference == "constant":
        return loss.inverse_link(torch.ones_like(f[0]))
    raise ConfigError(f"unknown aggregation reference {reference!r}; choose 'mean' or 'constant'")


def aggregate(
    loss: BregmanLoss,
    f_p: torch.Tensor,
    f_q: torch.Tensor,
    jitter: float = 1e-3,
    newton_steps: int = 1,
    reference: str = "mean",
) -> torch.Tensor:
    """The aggregation weights α̂ ``(K,)`` of candidates ``f_p: (K, M)``, ``f_q: (K, N)``.

    The first Hessian is taken at ``reference`` (:func:`reference_values`); ``newton_steps`` > 1 re-centres
    it at the last aggregate and repeats (many steps reach the risk minimiser over the span; for KuLSIF
    and SQ one step already does).
    """
    if newton_steps < 1:
        raise ConfigError(f"newton_steps must be >= 1, got {newton_steps}")
    ref_p, ref_q = reference_values(loss, f_p, reference), reference_values(loss, f_q, reference)
    for _ in range(newton_steps):
        gram, target = hessian_system(loss, f_p, f_q, ref_p, ref_q)
        weights = solve_weights(gram, target, jitter)
        ref_p, ref_q = weights @ f_p, weights @ f_q
    return weights


def uniform_weights(k: int, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """α_k = 1/K: the uniform average of the candidates' f (the ablation without the Hessian solve)."""
    return torch.full((k,), 1 / k, dtype=dtype)


def selection_weights(cv_risk: torch.Tensor) -> torch.Tensor:
    """One-hot on the candidate with the lowest cross-validated risk (CV model selection)."""
    return torch.nn.functional.one_hot(cv_risk.argmin(), len(cv_risk)).to(cv_risk.dtype)


def bma_weights(cv_risk: torch.Tensor, n: float) -> torch.Tensor:
    """Pseudo-BMA: softmax(−n · CV risk), the risk read as a per-sample negative log-likelihood and ``n`` the
    number of held-out samples per class (Yao et al. 2018's weights, with the DRE loss)."""
    return torch.softmax(-n * cv_risk, dim=0)


def super_learner_weights(
    loss: BregmanLoss, oof_p: torch.Tensor, oof_q: torch.Tensor, jitter: float = 1e-3
) -> torch.Tensor:
    """Super Learner stacking: non-negative α minimising the quadratic model (at the candidates' mean) of
    the out-of-fold risk; ``oof_*: (K, n)`` out-of-fold predictions. Not renormalised to sum 1, since
    for KuLSIF that would rescale the ratio."""
    gram, target = hessian_system(loss, oof_p, oof_q, oof_p.mean(0), oof_q.mean(0))
    gram = gram + torch.diag(jitter * gram.diagonal().clamp_min(torch.finfo(gram.dtype).tiny))
    # ½αᵀGα − rᵀα = ½‖Lᵀα − L⁻¹r‖² + const with G = LLᵀ.
    chol = torch.linalg.cholesky(gram)
    rhs = torch.linalg.solve_triangular(chol, target[:, None], upper=False)[:, 0]
    alpha, _ = nnls(chol.T.numpy(), rhs.numpy(), maxiter=50 * len(gram))
    return torch.from_numpy(np.asarray(alpha)).to(gram.dtype)
