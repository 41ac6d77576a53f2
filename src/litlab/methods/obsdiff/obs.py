"""OBS-Diff's math in plain torch: timestep weights, the weighted Hessian, OBS pruning and its baselines.

For a linear layer y = W x (W: (rows, cols)), pruning minimises the layer's reconstruction error
‖(W − Ŵ) X‖² whose Hessian is H = 2 X Xᵀ. OBS-Diff accumulates it over full sampling trajectories with
a weight per denoising step, H = 2 Σ_b w_t(b) X_b X_bᵀ / Σ_b w_t(b) n_b (n_b: the batch size of call b,
not its token count), and prunes with SparseGPT's column-wise OBS solver (no quantisation).
"""

from __future__ import annotations

import math

import torch

from litlab.core.errors import ConfigError

SCHEDULES = ("uniform", "log_decrease", "log_increase", "linear_decrease", "linear_increase")


def timestep_weights(schedule: str, steps: int, w_min: float = 0.8, w_max: float = 1.2) -> torch.Tensor:
    """(steps,) weights of the sampling steps, step 0 the first (noisiest) one.

    log_decrease (the paper's default): w_t = w_min + (w_max − w_min)·ln(T − t)/ln T, from w_max to w_min.
    """
    if schedule not in SCHEDULES:
        raise ConfigError(f"unknown timestep weighting {schedule!r}; choose one of {', '.join(SCHEDULES)}")
    if steps < 1:
        raise ConfigError(f"steps must be >= 1, got {steps}")
    t = torch.arange(steps, dtype=torch.float64)
    span = w_max - w_min
    if schedule == "uniform" or steps == 1:
        return torch.ones(steps, dtype=torch.float64)
    if schedule == "log_decrease":
        return w_min + span * torch.log(steps - t) / math.log(steps)
    if schedule == "log_increase":
        return w_min + span * torch.log(t + 1) / math.log(steps)
    ramp = t / (steps - 1)
    return w_max - span * ramp if schedule == "linear_decrease" else w_min + span * ramp


class HessianAccumulator:
    """Running H = 2 Σ_b w_b X_b X_bᵀ / Σ_b w_b n_b of one layer's inputs (float64 on the layer's device).

    ``add(x, weight)`` takes the layer input x: (batch, ..., cols); every token is a column of X_b and
    the batch size n_b enters the normaliser, as in the official code.
    """

    def __init__(self, cols: int, device: torch.device | str = "cpu") -> None:
        self.sum = torch.zeros(cols, cols, dtype=torch.float64, device=device)
        self.norm = 0.0

    def add(self, x: torch.Tensor, weight: float = 1.0) -> None:
        flat = x.detach().reshape(-1, x.shape[-1]).double()
        self.sum.addmm_(flat.T, flat, alpha=weight)
        self.norm += weight * (x.shape[0] if x.dim() > 1 else 1)

    @property
    def hessian(self) -> torch.Tensor:
        """(cols, cols) the weighted, normalised Hessian."""
        if self.norm == 0:
            raise ConfigError("the Hessian saw no inputs: the hooked layer never ran during calibration")
        return 2.0 * self.sum / self.norm


def _inverse_cholesky(hessian: torch.Tensor, damp: float) -> torch.Tensor:
    """Upper Cholesky factor U of (H + damp·mean(diag H)·I)⁻¹ (float64)."""
    h = hessian.double().clone()
    idx = torch.arange(h.shape[0], device=h.device)
    h[idx, idx] += damp * h.diagonal().mean()
    inverse = torch.cholesky_inverse(torch.linalg.cholesky(h))
    return torch.linalg.cholesky(inverse, upper=True)


def _check_pattern(sparsity: float, n: int, m: int, cols: int) -> None:
    if n or m:
        if not 0 < n < m:
            raise ConfigError(f"N:M sparsity needs 0 < N < M, got {n}:{m}")
        if cols % m:
            raise ConfigError(f"N:M sparsity needs the input width {cols} to be a multiple of M={m}")
    elif not 0.0 <= sparsity < 1.0:
        raise ConfigError(f"sparsity must be in [0, 1), got {sparsity}")


def smallest_mask(score: torch.Tensor, sparsity: float, n: int = 0, m: int = 0) -> torch.Tensor:
    """Boolean mask (same shape as score) of the entries to prune: exactly ``round(sparsity·numel)``
    smallest scores, or with n:m the n smallest of every m consecutive columns in each row."""
    if n:
        rows, cols = score.shape
        groups = score.reshape(rows, cols // m, m)
        index = groups.topk(n, dim=-1, largest=False).indices
        return torch.zeros_like(groups, dtype=torch.bool).scatter_(-1, index, True).reshape(rows, cols)
    k = round(sparsity * score.numel())
    mask = torch.zeros(score.numel(), dtype=torch.bool, device=score.device)
    if k:
        mask[score.flatten().topk(k, largest=False).indices] = True
    return mask.reshape(score.shape)


def obs_prune(
    weight: torch.Tensor,
    hessian: torch.Tensor,
    sparsity: float = 0.5,
    n: int = 0,
    m: int = 0,
    blocksize: int = 128,
    damp: float = 0.01,
) -> tuple[torch.Tensor, torch.Tensor]:
    """SparseGPT's column-wise OBS: (pruned weight, pruned mask), weight (rows, cols), hessian (cols, cols).

    Per block of ``blocksize`` columns the entries with the smallest w²/U_ii² are masked (``sparsity`` of
    the block, or with n:m the n smallest of each m columns); column i then updates the columns after it,
    W[:, i:] −= ((w − q)/U_ii)·U[i, i:], U the upper Cholesky factor of the damped H⁻¹; later blocks get
    the lazy batched update. Dead inputs (H_ii = 0) are pruned first.
    """
    rows, cols = weight.shape
    _check_pattern(sparsity, n, m, cols)
    if n and blocksize % m:
        raise ConfigError(f"blocksize {blocksize} must be a multiple of M={m}")
    w = weight.detach().double().clone()
    h = hessian.detach().double().clone()
    dead = h.diagonal() == 0
    h[dead, dead] = 1.0
    w[:, dead] = 0.0
    u = _inverse_cholesky(h, damp)
    mask = torch.zeros(rows, cols, dtype=torch.bool, device=w.device)
    for start in range(0, cols, blocksize):
        stop = min(start + blocksize, cols)
        block = w[:, start:stop].clone()
        u_block = u[start:stop, start:stop]
        diag = u_block.diagonal()
        errors = torch.zeros_like(block)
        block_mask = (
            smallest_mask(block.square() / diag.square(), sparsity)
            if not n
            else torch.zeros_like(block).bool()
        )
        for i in range(stop - start):
            if n and i % m == 0:
                score = block[:, i : i + m].square() / diag[i : i + m].square()
                block_mask[:, i : i + m] = smallest_mask(score, 0.0, n, m)
            column = block[:, i]
            error = torch.where(block_mask[:, i], column, 0.0) / diag[i]
            block[:, i:] -= error.unsqueeze(1) * u_block[i, i:].unsqueeze(0)
            block[:, i] = torch.where(block_mask[:, i], 0.0, block[:, i])
            errors[:, i] = error
        w[:, start:stop] = block
        mask[:, start:stop] = block_mask
        w[:, stop:] -= errors @ u[start:stop, stop:]
    return w.to(weight.dtype), mask


def magnitude_mask(weight: torch.Tensor, sparsity: float = 0.5, n: int = 0, m: int = 0) -> torch.Tensor:
    """Prune the smallest |W| over the whole layer (or n of every m inputs per row)."""
    _check_pattern(sparsity, n, m, weight.shape[1])
    return smallest_mask(weight.detach().abs(), sparsity, n, m)


def wanda_mask(
    weight: torch.Tensor, input_sq_norm: torch.Tensor, sparsity: float = 0.5, n: int = 0, m: int = 0
) -> torch.Tensor:
    """Wanda: score |W_ij|·‖X_j‖₂ compared within each output row (or n of every m inputs per row).

    ``input_sq_norm``: (cols,) Σ x_j² over the calibration tokens (the diagonal of X Xᵀ).
    """
    _check_pattern(sparsity, n, m, weight.shape[1])
    score = weight.detach().abs() * input_sq_norm.to(weight.device, weight.dtype).clamp_min(0).sqrt()
    if n:
        return smallest_mask(score, 0.0, n, m)
    k = round(sparsity * weight.shape[1])
    mask = torch.zeros_like(score, dtype=torch.bool)
    if k:
        mask.scatter_(1, score.topk(k, dim=1, largest=False).indices, True)
    return mask


def reconstruction_error(weight: torch.Tensor, pruned: torch.Tensor, hessian: torch.Tensor) -> float:
    """tr((W − Ŵ) H (W − Ŵ)ᵀ): the layer's output error on the calibration inputs (up to H's scale)."""
    delta = (weight - pruned).double()
    return float(torch.einsum("ri,ij,rj->", delta, hessian.double(), delta))
