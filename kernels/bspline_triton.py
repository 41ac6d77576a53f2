"""Triton B-spline basis: Cox–de Boor unrolled over the order, one program per block of (sample, input) rows.

Each row holds the ``G + 2k`` order-0 indicators as a vector; every recursion level needs the right
neighbour ``B_{c+1}``, which ``tl.gather`` supplies in registers. Works on any knot vector (uniform or
adapted by a grid update). Runs under ``TRITON_INTERPRET=1`` on CPU tensors, which is how tests check it.
Import this module only where triton is installed; ``litlab.kernels.bspline`` does so lazily.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from torch import Tensor

from litlab.kernels.bspline import bspline_basis_derivative

_ELEMENTS_PER_PROGRAM = 4096


@triton.jit
def _safe_span(span):
    """Zero knot spans become 1: the matching lower-order basis is 0 there (Cox–de Boor's 0/0 = 0)."""
    return tl.where(span == 0.0, 1.0, span)


@triton.jit
def _bspline_kernel(
    x_ptr,
    grid_ptr,
    out_ptr,
    n_rows,
    n_in,
    n_knots,
    n_basis,
    K: tl.constexpr,
    DERIVATIVE: tl.constexpr,
    WIDTH: tl.constexpr,
    BLOCK_ROWS: tl.constexpr,
    LAST: tl.constexpr,
):
    """out[row, c] = B_{c,K}(x[row]) (or its x-derivative) for rows = flattened (sample, feature)."""
    # int64 offsets: batch * n_in * (G + k) passes 2^31 for large batches.
    rows = tl.program_id(0).to(tl.int64) * BLOCK_ROWS + tl.arange(0, BLOCK_ROWS)
    row_ok = rows < n_rows
    x = tl.load(x_ptr + rows, mask=row_ok, other=0.0)[:, None]
    cols = tl.arange(0, WIDTH)[None, :]
    knots = grid_ptr + (rows % n_in)[:, None] * n_knots
    row_ok = row_ok[:, None]

    t_c = tl.load(knots + cols, mask=row_ok & (cols < n_knots), other=0.0)
    t_c1 = tl.load(knots + cols + 1, mask=row_ok & (cols + 1 < n_knots), other=0.0)
    bases = tl.where((x >= t_c) & (x < t_c1) & (cols + 1 < n_knots), 1.0, 0.0).to(x.dtype)
    neighbour = tl.minimum(cols + 1, WIDTH - 1) + tl.zeros_like(rows)[:, None]

    for d in tl.static_range(1, LAST + 1):  # the recursion's last degree: K, or K - 1 for the derivative
        valid = row_ok & (cols + d + 1 < n_knots)
        t_cd = tl.load(knots + cols + d, mask=valid, other=0.0)
        t_cd1 = tl.load(knots + cols + d + 1, mask=valid, other=0.0)
        right_bases = tl.gather(bases, neighbour, axis=1)
        left = (x - t_c) / _safe_span(t_cd - t_c) * bases
        right = (t_cd1 - x) / _safe_span(t_cd1 - t_c1) * right_bases
        bases = tl.where(valid, left + right, 0.0)

    if DERIVATIVE:
        if K == 0:
            bases = tl.zeros_like(bases)
        else:
            valid = row_ok & (cols + K + 1 < n_knots)
            t_ck = tl.load(knots + cols + K, mask=valid, other=0.0)
            t_ck1 = tl.load(knots + cols + K + 1, mask=valid, other=0.0)
            right_bases = tl.gather(bases, neighbour, axis=1)
            slope = bases / _safe_span(t_ck - t_c) - right_bases / _safe_span(t_ck1 - t_c1)
            bases = tl.where(valid, K * slope, 0.0)

    tl.store(out_ptr + rows[:, None] * n_basis + cols, bases, mask=row_ok & (cols < n_basis))


def _launch(x: Tensor, grid: Tensor, k: int, derivative: bool) -> Tensor:
    """Run the kernel: x (batch, n_in), grid (n_in, G + 2k + 1) -> (batch, n_in, G + k) in x's dtype."""
    if x.dim() != 2 or grid.dim() != 2 or grid.shape[0] != x.shape[1]:
        raise ValueError(
            f"need x (batch, n_in) and grid (n_in, n_knots); got {tuple(x.shape)}, {tuple(grid.shape)}"
        )
    batch, n_in = x.shape
    n_knots = grid.shape[1]
    n_basis = n_knots - 1 - k
    x = x.contiguous()
    grid = grid.to(x.dtype).contiguous()
    out = torch.empty(batch, n_in, n_basis, dtype=x.dtype, device=x.device)
    n_rows = batch * n_in
    if n_rows == 0:
        return out
    width = triton.next_power_of_2(n_knots - 1)
    block_rows = max(1, _ELEMENTS_PER_PROGRAM // width)
    _bspline_kernel[(triton.cdiv(n_rows, block_rows),)](
        x, grid, out, n_rows, n_in, n_knots, n_basis,
        K=k, DERIVATIVE=derivative, WIDTH=width, BLOCK_ROWS=block_rows, LAST=k - 1 if derivative else k,
    )  # fmt: skip
    return out


class _BSplineBasisFunction(torch.autograd.Function):
    """Triton forward; backward contracts the incoming gradient with the analytic derivative basis."""

    @staticmethod
    def forward(ctx, x: Tensor, grid: Tensor, k: int) -> Tensor:
        ctx.save_for_backward(x, grid)
        ctx.k = k
        return _launch(x, grid, k, derivative=False)

    @staticmethod
    def backward(ctx, grad_out: Tensor) -> tuple[Tensor | None, None, None]:
        x, grid = ctx.saved_tensors
        if not ctx.needs_input_grad[0]:
            return None, None, None
        # With create_graph (PINN losses need d²/dx²) the torch derivative keeps the graph; else use Triton.
        if torch.is_grad_enabled():
            derivative = bspline_basis_derivative(x, grid.to(x.dtype), ctx.k)
        else:
            derivative = _launch(x, grid, ctx.k, derivative=True)
        return (grad_out * derivative).sum(-1), None, None


def bspline_basis_triton(x: Tensor, grid: Tensor, k: int = 3) -> Tensor:
    """Triton ``bspline_basis``, differentiable in x (not in the knots, which KANs keep as buffers).

    x: (batch, n_in), grid: (n_in, G + 2k + 1) -> (batch, n_in, G + k).
    """
    return _BSplineBasisFunction.apply(x, grid, k)


def bspline_basis_derivative_triton(x: Tensor, grid: Tensor, k: int = 3) -> Tensor:
    """Triton ``bspline_basis_derivative`` (no autograd).

    x: (batch, n_in), grid: (n_in, G + 2k + 1) -> (batch, n_in, G + k).
    """
    return _launch(x, grid, k, derivative=True)
