"""Kernel density-ratio estimators, each fitted over a whole (bandwidth × regularisation) grid at once.

All models are f(x) = Φ_σ(x) T_σ u with Gaussian features Φ at ``b`` centres drawn from P:

- ``kulsif`` (Kanamori et al. 2012) and the RKHS ERMs ``lr``, ``exp``, ``sq``: T_σ is the Nyström
  whitening (:func:`~litlab.methods.dre.kernels.nystrom_transforms`), so the penalty λ‖f‖²_RKHS is λ‖u‖²;
  KuLSIF and SQ are closed forms (one eigendecomposition per σ gives every λ), LR and Exp damped Newton.
- ``ulsif`` (Kanamori et al. 2009): T = I, penalty λ‖θ‖², negative coefficients set to 0 as in the paper.
- ``kliep`` (Sugiyama et al. 2008): T = I, no λ (see :mod:`~litlab.methods.dre.kliep`).

Every fitted grid predicts ``(K, n)`` values f_k(x) for its K = S·L candidates, σ-major.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from litlab.core.errors import ConfigError
from litlab.methods.dre.kernels import gaussian_features, nystrom_transforms
from litlab.methods.dre.kliep import fit_kliep
from litlab.methods.dre.losses import BregmanLoss, get_loss

# The loss each estimator minimises, and under which its candidates are scored and aggregated.
METHOD_LOSS = {"kulsif": "kulsif", "ulsif": "kulsif", "kliep": "kulsif", "lr": "lr", "exp": "exp", "sq": "sq"}
QUADRATIC = ("kulsif", "sq")


@dataclass
class KernelGrid:
    """A fitted grid of kernel ratio models: f_{s,l}(x) = Φ_{σ_s}(x) T_s u_{s,l}.

    Shapes: ``centres: (b, d)``, ``sigmas: (S,)``, ``lams: (L,)``, ``transforms: (S, b, b)``,
    ``coefficients: (S, L, b)``.
    """

    method: str
    centres: torch.Tensor
    sigmas: torch.Tensor
    lams: torch.Tensor
    transforms: torch.Tensor
    coefficients: torch.Tensor

    @property
    def size(self) -> int:
        return self.coefficients.shape[0] * self.coefficients.shape[1]

    @property
    def loss(self) -> BregmanLoss:
        return get_loss(METHOD_LOSS[self.method])

    def labels(self) -> list[dict[str, float]]:
        """The hyperparameters of each of the K candidates, in prediction order."""
        return [{"sigma": float(s), "lam": float(lam)} for s in self.sigmas for lam in self.lams]

    def predict(self, x: torch.Tensor, chunk: int = 4096) -> torch.Tensor:
        """f_k(x) for every candidate: ``x: (n, d)`` → ``(K, n)``, in chunks of ``chunk`` rows."""
        parts = []
        for rows in x.split(chunk):
            features = gaussian_features(rows, self.centres, self.sigmas) @ self.transforms
            parts.append(torch.einsum("snb,slb->sln", features, self.coefficients).flatten(0, 1))
        return torch.cat(parts, dim=1)


def ridge_lsif(feat_p: torch.Tensor, feat_q: torch.Tensor, lams: torch.Tensor) -> torch.Tensor:
    """argmin_u ½ mean_Q (Ψu)² − mean_P Ψu + (λ/2)‖u‖² for every σ and λ: ``feat_*: (S, n, b)`` →
    ``(S, L, b)``, through one eigendecomposition of mean_Q ΨᵀΨ per σ."""
    gram = feat_q.transpose(1, 2) @ feat_q / feat_q.shape[1]
    h = feat_p.mean(1)
    values, vectors = torch.linalg.eigh(gram)
    projected = (vectors.transpose(1, 2) @ h[..., None])[..., 0]
    scaled = projected[:, None, :] / (values[:, None, :] + lams[None, :, None])
    return scaled @ vectors.transpose(1, 2)


def newton_erm(
    loss: BregmanLoss,
    feat_p: torch.Tensor,
    feat_q: torch.Tensor,
    lams: torch.Tensor,
    max_iter: int = 50,
    tol: float = 1e-12,
    halvings: int = 20,
) -> torch.Tensor:
    """argmin_u mean_P ℓ(+1, Ψu) + mean_Q ℓ(−1, Ψu) + (λ/2)‖u‖² for every σ and λ by damped Newton from 0.

    ``feat_*: (S, n, b)`` → ``(S, L, b)``. Each step backtracks (step 2^−k, the first that lowers the
    objective, per model); a model stops once its Newton decrement gᵀH⁻¹g is below ``tol`` or no step
    lowers its objective (rounding). A quadratic loss is solved in the first step.
    """
    m, n = feat_p.shape[1], feat_q.shape[1]
    u = feat_p.new_zeros(feat_p.shape[0], len(lams), feat_p.shape[2])
    eye = torch.eye(feat_p.shape[2], dtype=feat_p.dtype)
    steps = 0.5 ** torch.arange(halvings + 1, dtype=feat_p.dtype)[:, None, None]
    active = torch.ones(u.shape[:2], dtype=torch.bool)
    for _ in range(max_iter):
        f_p = torch.einsum("smb,slb->slm", feat_p, u)
        f_q = torch.einsum("smb,slb->slm", feat_q, u)
        grad = (
            torch.einsum("smb,slm->slb", feat_p, loss.d_pos(f_p)) / m
            + torch.einsum("smb,slm->slb", feat_q, loss.d_neg(f_q)) / n
            + lams[:, None] * u
        )
        hess = (
            torch.einsum("smb,slm,smc->slbc", feat_p, loss.dd_pos(f_p) / m, feat_p)
            + torch.einsum("smb,slm,smc->slbc", feat_q, loss.dd_neg(f_q) / n, feat_q)
            + lams[:, None, None] * eye
        )
        direction = torch.linalg.solve(hess, grad[..., None])[..., 0]
        active &= (grad * direction).sum(-1) > tol
        if not bool(active.any()):
            break
        d_p = torch.einsum("smb,slb->slm", feat_p, direction)
        d_q = torch.einsum("smb,slb->slm", feat_q, direction)
        current = loss.risk(f_p, f_q) + lams * u.square().sum(-1) / 2
        trial_u = u - steps[..., None] * direction
        trial = loss.risk(f_p - steps[..., None] * d_p, f_q - steps[..., None] * d_q)
        trial = torch.nan_to_num(trial + lams * trial_u.square().sum(-1) / 2, nan=torch.inf)
        better = trial < current
        active &= better.any(0)
        step = torch.where(active, steps[better.float().argmax(0), 0, 0], 0.0)
        u = u - step[..., None] * direction
    return u


def fit_grid(
    method: str,
    x_p: torch.Tensor,
    x_q: torch.Tensor,
    centres: torch.Tensor,
    sigmas: torch.Tensor,
    lams: torch.Tensor,
) -> KernelGrid:
    """Fit ``method`` (kulsif, ulsif, kliep, lr, exp, sq) on P rows ``x_p`` and Q rows ``x_q`` for every
    bandwidth in ``sigmas`` and regularisation in ``lams`` (KLIEP has no λ: one column, λ = 0)."""
    if method not in METHOD_LOSS:
        raise ConfigError(f"unknown ratio estimator {method!r}; choose one of {', '.join(METHOD_LOSS)}")
    phi_p = gaussian_features(x_p, centres, sigmas)
    phi_q = gaussian_features(x_q, centres, sigmas)
    if method in ("ulsif", "kliep"):
        transforms = torch.eye(len(centres), dtype=x_p.dtype).expand(len(sigmas), -1, -1)
    else:
        transforms = nystrom_transforms(centres, sigmas)
        phi_p, phi_q = phi_p @ transforms, phi_q @ transforms
    if method == "kliep":
        lams = lams.new_zeros(1)
        coefficients = fit_kliep(phi_p, phi_q)[:, None, :]
    elif method in ("kulsif", "ulsif"):
        coefficients = ridge_lsif(phi_p, phi_q, lams)
        if method == "ulsif":
            coefficients = coefficients.clamp_min(0)
    else:
        coefficients = newton_erm(get_loss(method), phi_p, phi_q, lams)
    return KernelGrid(method, centres, sigmas, lams, transforms.contiguous(), coefficients)
