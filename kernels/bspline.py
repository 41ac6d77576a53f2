"""B-spline bases for spline KANs: vectorised Cox–de Boor in pure torch, a closed form for uniform knots,
and a dispatcher to Triton.

Conventions (shared with efficient-kan, pykan and jaxKAN): each input feature has its own knot vector of
``G + 2k + 1`` knots, ``G`` intervals over ``[lo, hi]`` extended by ``k`` knots on each side; the order-0
indicators are half-open ``[t_c, t_{c+1})`` and the order-``k`` basis has ``G + k`` functions.

Cox–de Boor (``bspline_basis``) works on any knots and is the reference. On uniform knots only the k + 1
basis functions of the knot span holding x are nonzero, and they are fixed polynomials of the position u
in that span; ``bspline_basis_uniform`` evaluates those and scatters them, several times faster.
"""

from __future__ import annotations

import functools
import importlib.util
import inspect
import math
from fractions import Fraction

import torch
from torch import Tensor


def make_uniform_grid(
    n_in: int,
    grid_size: int,
    spline_order: int = 3,
    lo: float = -1.0,
    hi: float = 1.0,
    dtype: torch.dtype | None = None,
    device: torch.device | str | None = None,
) -> Tensor:
    """Uniform knots ``lo + h*(-k, ..., G + k)`` with ``h = (hi - lo) / G``, one row per input feature.

    Returns: (n_in, G + 2k + 1).
    """
    if grid_size < 1 or spline_order < 0 or not hi > lo:
        raise ValueError(
            f"need grid_size >= 1, spline_order >= 0, hi > lo; got {grid_size}, {spline_order}, {lo}, {hi}"
        )
    h = (hi - lo) / grid_size
    steps = torch.arange(-spline_order, grid_size + spline_order + 1, dtype=dtype, device=device)
    return (lo + h * steps).expand(n_in, -1).contiguous()


def _safe_span(span: Tensor) -> Tensor:
    """Replace zero knot spans by 1: the matching lower-order basis is 0 there (Cox–de Boor's 0/0 = 0)."""
    return torch.where(span == 0, torch.ones_like(span), span)


def _cox_de_boor(x: Tensor, grid: Tensor, order: int) -> Tensor:
    """All B-splines of the given order at x.

    x: (batch, n_in), grid: (n_in, n_knots) -> (batch, n_in, n_knots - 1 - order).
    """
    x = x.unsqueeze(-1)
    bases = ((x >= grid[:, :-1]) & (x < grid[:, 1:])).to(x.dtype)
    for d in range(1, order + 1):
        left = (x - grid[:, : -(d + 1)]) / _safe_span(grid[:, d:-1] - grid[:, : -(d + 1)])
        right = (grid[:, d + 1 :] - x) / _safe_span(grid[:, d + 1 :] - grid[:, 1:-d])
        bases = left * bases[..., :-1] + right * bases[..., 1:]
    return bases


def bspline_basis(x: Tensor, grid: Tensor, k: int = 3) -> Tensor:
    """B-spline basis of order k (degree k) at x, differentiable in x by autograd.

    x: (batch, n_in), grid: (n_in, G + 2k + 1) -> (batch, n_in, G + k).
    """
    return _cox_de_boor(x, grid, k)


def bspline_basis_derivative(x: Tensor, grid: Tensor, k: int = 3) -> Tensor:
    """d/dx of each basis function from the order k-1 basis (exact, no autograd):
    B'_c = k (B_c/(t_{c+k} - t_c) - B_{c+1}/(t_{c+k+1} - t_{c+1})).

    x: (batch, n_in), grid: (n_in, G + 2k + 1) -> (batch, n_in, G + k).
    """
    if k == 0:
        return x.new_zeros(*x.shape, grid.shape[-1] - 1)
    lower = _cox_de_boor(x, grid, k - 1)
    left = lower[..., :-1] / _safe_span(grid[:, k:-1] - grid[:, : -(k + 1)])
    right = lower[..., 1:] / _safe_span(grid[:, k + 1 :] - grid[:, 1:-k])
    return k * (left - right)


def uniform_knot_map(grid: Tensor) -> tuple[Tensor, Tensor] | None:
    """(offset, inv_h) with x·inv_h + offset = (x - t_0)/h per feature if every knot row is uniform up to
    rounding (each knot within 8 ulp of max|t| of the line t_0 + c·h), else None.

    grid: (n_in, n_knots) -> two (n_in,) tensors, or None.
    """
    with torch.no_grad():
        n_intervals = grid.shape[1] - 1
        first, last = grid[:, :1], grid[:, -1:]
        steps = torch.arange(n_intervals + 1, dtype=grid.dtype, device=grid.device)
        line = first + (last - first) / n_intervals * steps
        tolerance = 8 * torch.finfo(grid.dtype).eps * grid.abs().max()
        if not bool((grid - line).abs().max() <= tolerance) or not bool((last > first).all()):
            return None
        inv_h = n_intervals / (last - first).squeeze(1)
        return -first.squeeze(1) * inv_h, inv_h


@functools.cache
def _cardinal_pieces(k: int) -> tuple[tuple[Fraction, ...], ...]:
    """Exact power-series coefficients of the k + 1 uniform B-spline pieces on a knot span.

    Entry (r, p): coefficient of u^p in B_{j-k+r}(x), x = t_j + u h, u in [0, 1). Built by the uniform
    Cox–de Boor step b_d[r] = ((u + d - r) b_{d-1}[r-1] + (r + 1 - u) b_{d-1}[r]) / d from b_0 = [1].
    """
    pieces = [[Fraction(1)]]
    for d in range(1, k + 1):
        new = []
        for r in range(d + 1):
            poly = [Fraction(0)] * (d + 1)
            if r >= 1:  # (u + d - r) / d · b_{d-1}[r-1]
                for p, c in enumerate(pieces[r - 1]):
                    poly[p] += c * Fraction(d - r, d)
                    poly[p + 1] += c / d
            if r <= d - 1:  # (r + 1 - u) / d · b_{d-1}[r]
                for p, c in enumerate(pieces[r]):
                    poly[p] += c * Fraction(r + 1, d)
                    poly[p + 1] -= c / d
            new.append(poly)
        pieces = new
    return tuple(tuple(poly) for poly in pieces)


@functools.cache
def _power_table(k: int, derivative: int, dtype: torch.dtype, device: torch.device) -> Tensor:
    """Entry (p, r): coefficient of u^p in the ``derivative``-th u-derivative of piece r.

    Returns: (k + 1 - derivative, k + 1).
    """
    pieces = _cardinal_pieces(k)
    table = [
        [float(poly[p + derivative] * math.perm(p + derivative, derivative)) for poly in pieces]
        for p in range(k + 1 - derivative)
    ]
    return torch.tensor(table, dtype=dtype, device=device)


def _horner(table: Tensor, u: Tensor) -> Tensor:
    """Σ_p table[p, r] u^p for every piece r, pieces first so that every step runs over contiguous u.

    table: (P, k + 1), u: (...) -> (k + 1, ...).
    """
    rows = table.view(*table.shape, *[1] * u.dim())
    if table.shape[0] == 1:
        return rows[0].expand(table.shape[1], *u.shape)
    out = torch.addcmul(rows[-2], u, rows[-1])
    for p in range(table.shape[0] - 3, -1, -1):
        out = torch.addcmul(rows[p], out, u)
    return out


def _position(x: Tensor, offset: Tensor, inv_h: Tensor) -> tuple[Tensor, Tensor]:
    """Knot span index (float, no gradient) and position u in [0, 1) in it (differentiable in x)."""
    s = torch.addcmul(offset, x, inv_h)
    span = s.detach().floor()
    return span, s - span


def _piece_slots(span: Tensor, n_basis: int, k: int, sample_shape: tuple[int, ...]) -> tuple[Tensor, Tensor]:
    """Which of the span's k + 1 pieces B_{span-k+r} are absent (not among the n_basis functions), and the
    slot of each in the flat (*sample_shape, n_basis) basis of its own sample; an absent piece's slot is
    clamped into its own row, where it must carry 0.

    The trailing dims of span are one sample's; leading ones, if any, are samples batched by vmap. Spans
    outside the knots are clamped to one past either end, where no piece exists; a NaN span goes to span 0
    so that NaN reaches the basis. Slots are int32 (half the memory traffic of int64) unless the basis has
    2^31 entries or more. span: (..., *sample_shape) -> two (k + 1, ..., *sample_shape).
    """
    dtype = torch.int32 if span.numel() * n_basis < 2**31 else torch.int64
    span = span.clamp(-1, n_basis + k).nan_to_num(0.0).to(dtype)
    index = span.unsqueeze(0) + torch.arange(-k, 1, dtype=dtype, device=span.device).view(
        -1, *[1] * span.dim()
    )
    column = index.clamp(0, n_basis - 1)
    rows = torch.arange(0, math.prod(sample_shape) * n_basis, n_basis, dtype=dtype, device=span.device)
    return index != column, rows.view(sample_shape) + column


def _global_slots(slots: Tensor, n_basis: int, sample_shape: tuple[int, ...]) -> Tensor:
    """Per-sample slots (k + 1, ..., *sample_shape) offset into the flat basis of all samples."""
    lead = slots.shape[1 : slots.dim() - len(sample_shape)]
    if not lead:
        return slots
    per_sample = math.prod(sample_shape) * n_basis
    offsets = torch.arange(
        0, math.prod(lead) * per_sample, per_sample, dtype=slots.dtype, device=slots.device
    )
    return slots + offsets.view(*lead, *[1] * len(sample_shape))


def _assemble(pieces: Tensor, slots: Tensor, n_basis: int, sample_shape: tuple[int, ...]) -> Tensor:
    """Dense basis from the pieces, absent ones zeroed: (k + 1, ...) -> (..., n_basis)."""
    flat = pieces.new_zeros(pieces[0].numel() * n_basis)
    flat.index_add_(0, _global_slots(slots, n_basis, sample_shape).reshape(-1), pieces.reshape(-1))
    return flat.view(*pieces.shape[1:], n_basis)


class _UniformBasis(torch.autograd.Function):
    """Closed-form uniform basis; its backward and jvp use the analytic derivative (the pieces' u-derivative
    times 1/h), written in differentiable torch ops so that every order of x-derivative is exact.

    Returns (basis, absent, slots); the backward reuses the absent-piece mask and the slots.
    ``sample_shape`` is x's shape as the caller sees it: under vmap the slots stay relative to one sample,
    which is what a per-sample backward indexes.
    """

    @staticmethod
    def forward(
        x: Tensor, offset: Tensor, inv_h: Tensor, n_basis: int, k: int, sample_shape: tuple[int, ...]
    ) -> tuple[Tensor, Tensor, Tensor]:
        span, u = _position(x, offset, inv_h)
        absent, slots = _piece_slots(span, n_basis, k, sample_shape)
        pieces = _horner(_power_table(k, 0, x.dtype, x.device), u).masked_fill_(absent, 0.0)
        return _assemble(pieces, slots, n_basis, sample_shape), absent, slots

    @staticmethod
    def setup_context(ctx, inputs: tuple, output: tuple[Tensor, Tensor, Tensor]) -> None:
        x, offset, inv_h, n_basis, k, sample_shape = inputs
        _, absent, slots = output
        ctx.mark_non_differentiable(absent, slots)
        ctx.set_materialize_grads(False)  # no zero-filled gradients for absent and slots
        ctx.save_for_backward(x, offset, inv_h, absent, slots)
        ctx.save_for_forward(x, offset, inv_h, absent, slots)
        ctx.n_basis, ctx.k, ctx.sample_shape = n_basis, k, sample_shape

    @staticmethod
    def _slopes(ctx) -> tuple[Tensor, Tensor, Tensor]:
        """dB/du of the span's pieces (k + 1, ...), differentiable in x when grad is on; their slots; and
        du/dx = 1/h, applied by the callers to the smaller (...) tensors."""
        x, offset, inv_h, absent, slots = ctx.saved_tensors
        _, u = _position(x, offset, inv_h)
        return _horner(_power_table(ctx.k, 1, x.dtype, x.device), u).masked_fill(absent, 0.0), slots, inv_h

    @staticmethod
    def backward(
        ctx, grad_out: Tensor, *_: Tensor | None
    ) -> tuple[Tensor | None, None, None, None, None, None]:
        if grad_out is None or not ctx.needs_input_grad[0]:
            return None, None, None, None, None, None
        slopes, slots, inv_h = _UniformBasis._slopes(ctx)
        slots = _global_slots(slots, ctx.n_basis, ctx.sample_shape)
        grad_pieces = grad_out.reshape(-1).index_select(0, slots.reshape(-1)).view_as(slopes)
        return torch.linalg.vecdot(slopes, grad_pieces, dim=0) * inv_h, None, None, None, None, None

    @staticmethod
    def jvp(ctx, x_tangent: Tensor, *_: Tensor | None) -> tuple[Tensor, None, None]:
        slopes, slots, inv_h = _UniformBasis._slopes(ctx)
        return _assemble(slopes * (x_tangent * inv_h), slots, ctx.n_basis, ctx.sample_shape), None, None

    @staticmethod
    def vmap(
        info,
        in_dims: tuple,
        x: Tensor,
        offset: Tensor,
        inv_h: Tensor,
        n_basis: int,
        k: int,
        sample_shape: tuple[int, ...],
    ) -> tuple[tuple[Tensor, Tensor, Tensor], tuple[int, int, int]]:
        """Every op broadcasts over leading dims: move the vmapped dims to the front and run once."""
        size = info.batch_size
        x_dim, offset_dim, inv_h_dim = in_dims[:3]
        x = x.unsqueeze(0).expand(size, *x.shape) if x_dim is None else x.movedim(x_dim, 0)
        lead = (size,) + (1,) * (x.dim() - 2)
        offset = offset if offset_dim is None else offset.movedim(offset_dim, 0).reshape(*lead, -1)
        inv_h = inv_h if inv_h_dim is None else inv_h.movedim(inv_h_dim, 0).reshape(*lead, -1)
        return _UniformBasis.apply(x, offset, inv_h, n_basis, k, sample_shape), (0, 1, 1)


# Function.apply binds its arguments to ``forward``'s signature on every call (setup_context style);
# computing that signature took about 110 us per call, a seventh of a default KAN step. Computed once here.
_UniformBasis.forward.__signature__ = inspect.signature(_UniformBasis.forward)


def bspline_basis_uniform(x: Tensor, offset: Tensor, inv_h: Tensor, n_basis: int, k: int = 3) -> Tensor:
    """The B-spline basis on uniform knots in closed form; equals ``bspline_basis`` up to rounding.

    ``(offset, inv_h)`` come from ``uniform_knot_map(grid)`` and ``n_basis = G + k``. Differentiable in x to
    any order (also forward mode and under vmap); not in the knots. x: (..., n_in) -> (..., n_in, n_basis).
    """
    if k < 1:
        raise ValueError(f"the closed form needs spline order k >= 1 (k = 0 is an indicator), got {k}")
    return _UniformBasis.apply(x, offset, inv_h, n_basis, k, tuple(x.shape))[0]


def bspline_basis_fast(x: Tensor, grid: Tensor, k: int = 3) -> Tensor:
    """``bspline_basis_uniform`` when the knots are uniform and k >= 1, else Cox–de Boor.

    Checks the knots on every call (a host sync on GPU); ``KANLayer`` caches the check per grid.
    x: (batch, n_in), grid: (n_in, G + 2k + 1) -> (batch, n_in, G + k).
    """
    knot_map = uniform_knot_map(grid) if k >= 1 else None
    if knot_map is None:
        return bspline_basis(x, grid, k)
    return bspline_basis_uniform(x, *knot_map, grid.shape[1] - 1 - k, k)


@functools.cache
def triton_available() -> bool:
    """Whether triton can be imported (checked once, without importing it)."""
    return importlib.util.find_spec("triton") is not None


def bspline_basis_auto(x: Tensor, grid: Tensor, k: int = 3) -> Tensor:
    """``bspline_basis`` through the Triton kernel when x is on CUDA and triton is installed, else torch.

    x: (batch, n_in), grid: (n_in, G + 2k + 1) -> (batch, n_in, G + k).
    """
    if x.is_cuda and triton_available():
        from litlab.kernels.bspline_triton import bspline_basis_triton

        return bspline_basis_triton(x, grid, k)
    return bspline_basis(x, grid, k)
