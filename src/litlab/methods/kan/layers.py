"""Spline KAN layers (efficient-kan layout): the basis is computed once per input, then one matmul."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from litlab.kernels.bspline import (
    bspline_basis,
    bspline_basis_auto,
    bspline_basis_uniform,
    make_uniform_grid,
    uniform_knot_map,
)
from litlab.methods.kan.init import InitScheme

BasisBackend = Literal["auto", "torch", "triton"]
STANDARDIZE_EPS = 1e-5


class KANLayer(nn.Module):
    """One KAN layer: y_j = Σ_i [ r_ji SiLU(x_i) + c_ji Σ_m b_jim B_m(x_i) ] + bias_j.

    B_m are the ``G + k`` B-splines of order k on a uniform grid over ``grid_range`` (one knot row per
    input, a buffer that ``update_grid`` may move). Parameters: ``residual_weight`` r (n_out, n_in),
    ``spline_weight`` b (n_out, n_in, G + k), ``spline_scale`` c (n_out, n_in), ``bias`` (n_out,).
    Initialised with the paper's baseline (LeCun-normalized if standardised); ``InitScheme.apply`` redraws.

    With ``standardize_basis`` (the LeCun-normalized scheme) every forward pass replaces each basis output
    B_m(x_i) by (B_m(x_i) - mean) / √(var + 1e-5), mean and biased var taken over the batch for each
    (i, m), before the weights: batch statistics always, in eval too, and no running averages, as in
    the official code. Outputs then depend on the batch, so evaluate on full batches.

    Args:
        n_in, n_out: input and output widths.
        grid_size: G, the number of grid intervals.
        spline_order: k (3 = cubic).
        grid_range: (lo, hi) of the initial grid.
        standardize_basis: batch-standardise the basis outputs (see above).
        backend: ``"auto"`` (Triton on CUDA when installed, else torch), ``"torch"`` or ``"triton"``. The
            torch basis is the closed form while the knots are uniform (k >= 1), else Cox–de Boor.
    """

    def __init__(
        self,
        n_in: int,
        n_out: int,
        grid_size: int,
        spline_order: int = 3,
        grid_range: tuple[float, float] = (-1.0, 1.0),
        standardize_basis: bool = False,
        backend: BasisBackend = "auto",
    ) -> None:
        super().__init__()
        if backend not in ("auto", "torch", "triton"):
            raise ValueError(f"backend must be 'auto', 'torch' or 'triton', got {backend!r}")
        self.n_in, self.n_out = n_in, n_out
        self.grid_size, self.spline_order = grid_size, spline_order
        self.standardize_basis = standardize_basis
        self.backend = backend
        lo, hi = grid_range
        self.register_buffer("grid", make_uniform_grid(n_in, grid_size, spline_order, lo, hi))
        self.residual_weight = nn.Parameter(torch.empty(n_out, n_in))
        self.spline_weight = nn.Parameter(torch.empty(n_out, n_in, grid_size + spline_order))
        self.spline_scale = nn.Parameter(torch.ones(n_out, n_in))
        self.bias = nn.Parameter(torch.zeros(n_out))
        self._knot_map_key: tuple | None = None
        self._knot_map: tuple[Tensor, Tensor] | None = None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Re-draw the parameters: the baseline, or LeCun-normalized for a standardised basis."""
        InitScheme("lecun_normalized" if self.standardize_basis else "baseline").apply(self)

    def extra_repr(self) -> str:
        return (
            f"n_in={self.n_in}, n_out={self.n_out}, grid_size={self.grid_size}, "
            f"spline_order={self.spline_order}, standardize_basis={self.standardize_basis}"
        )

    def uniform_knot_map(self) -> tuple[Tensor, Tensor] | None:
        """``uniform_knot_map(grid)``, recomputed only when the grid buffer changes (moved, cast, loaded or
        updated in place: its storage or version counter changes)."""
        grid = self.grid
        key = (grid.data_ptr(), grid._version, grid.dtype, grid.device, grid.shape)
        if key != self._knot_map_key:
            self._knot_map = uniform_knot_map(grid) if self.spline_order >= 1 else None
            self._knot_map_key = key
        return self._knot_map

    def raw_basis(self, x: Tensor) -> Tensor:
        """B-spline basis on the current grid. x: (batch, n_in) -> (batch, n_in, G + k)."""
        if self.backend == "triton":
            from litlab.kernels.bspline_triton import bspline_basis_triton

            return bspline_basis_triton(x, self.grid, self.spline_order)
        if self.backend == "auto" and x.is_cuda:
            return bspline_basis_auto(x, self.grid, self.spline_order)
        knot_map = self.uniform_knot_map()
        if knot_map is None:
            return bspline_basis(x, self.grid, self.spline_order)
        n_basis = self.grid_size + self.spline_order
        return bspline_basis_uniform(x, *knot_map, n_basis, self.spline_order)

    def basis(self, x: Tensor) -> Tensor:
        """The basis the weights see: raw, or batch-standardised per (i, m).

        x: (batch, n_in) -> (batch, n_in, G + k).
        """
        bases = self.raw_basis(x)
        if not self.standardize_basis:
            return bases
        var, mean = torch.var_mean(bases, dim=0, correction=0, keepdim=True)
        return (bases - mean) * torch.rsqrt(var + STANDARDIZE_EPS)

    def forward(self, x: Tensor) -> Tensor:
        """x: (batch, n_in) -> (batch, n_out); c is folded into b so the spline branch is one matmul."""
        bases = self.basis(x).reshape(x.shape[0], -1)
        spline_weight = (self.spline_weight * self.spline_scale.unsqueeze(-1)).reshape(self.n_out, -1)
        return torch.addmm(F.linear(bases, spline_weight, self.bias), F.silu(x), self.residual_weight.t())

    @torch.no_grad()
    def update_grid(self, x: Tensor, grid_eps: float = 0.02, margin: float = 0.01) -> None:
        """Move the knots to the quantiles of x and refit b so every edge's spline keeps its values on x.

        The new G + 1 grid points mix the quantiles with a uniform grid over [min - margin, max + margin]
        (``grid_eps`` = weight of the uniform one), then k knots at the uniform step extend each side.
        b is the least-squares fit of the old per-edge splines Σ_m b_jim B_m(x_i) on the new basis; c, r
        and bias are unchanged, so the layer's function is kept up to the fit error. x: (batch, n_in).
        """
        if self.standardize_basis:
            raise ValueError(
                "update_grid refits raw splines; a batch-standardised basis has no fixed function"
            )
        old_splines = torch.einsum(
            "bim,oim->ibo", bspline_basis(x, self.grid, self.spline_order), self.spline_weight
        )

        g, k = self.grid_size, self.spline_order
        x_sorted = torch.sort(x, dim=0).values
        quantile_index = torch.linspace(0, x.shape[0] - 1, g + 1, device=x.device).round().long()
        adaptive = x_sorted[quantile_index]
        step = (x_sorted[-1] - x_sorted[0] + 2 * margin) / g
        uniform = (
            x_sorted[0] - margin + step * torch.arange(g + 1, device=x.device, dtype=x.dtype).unsqueeze(1)
        )
        inner = grid_eps * uniform + (1 - grid_eps) * adaptive
        outward = step * torch.arange(1, k + 1, device=x.device, dtype=x.dtype).unsqueeze(1)
        self.grid.copy_(torch.cat([inner[0] - outward.flip(0), inner, inner[-1] + outward]).T)

        new_bases = bspline_basis(x, self.grid, self.spline_order).transpose(0, 1)
        # gelsd copes with rank-deficient systems (few samples per knot span); CUDA offers only gels.
        driver = "gelsd" if x.device.type == "cpu" else None
        coefficients = torch.linalg.lstsq(new_bases, old_splines, driver=driver).solution
        self.spline_weight.copy_(coefficients.permute(2, 0, 1))


class KAN(nn.Module):
    """A stack of ``KANLayer`` with widths [n_0, ..., n_L], every layer initialised by ``init``.

    ``init`` is an ``InitScheme``, a scheme name, or a mapping such as
    ``{name: power, alpha: 0.25, beta: 1.75}``; the LeCun-normalized scheme turns on
    ``standardize_basis`` in every layer.
    """

    def __init__(
        self,
        widths: Sequence[int],
        grid_size: int,
        spline_order: int = 3,
        init: InitScheme | Mapping[str, Any] | str = "baseline",
        grid_range: tuple[float, float] = (-1.0, 1.0),
        backend: BasisBackend = "auto",
    ) -> None:
        super().__init__()
        if len(widths) < 2:
            raise ValueError(f"widths needs at least an input and an output width, got {list(widths)}")
        self.widths = list(widths)
        self.init_scheme = InitScheme.from_config(init)
        self.layers = nn.ModuleList(
            KANLayer(
                n_in,
                n_out,
                grid_size,
                spline_order,
                grid_range=grid_range,
                standardize_basis=self.init_scheme.standardize_basis,
                backend=backend,
            )
            for n_in, n_out in zip(self.widths[:-1], self.widths[1:])
        )
        for layer in self.layers:
            self.init_scheme.apply(layer)

    def forward(self, x: Tensor) -> Tensor:
        """x: (batch, widths[0]) -> (batch, widths[-1])."""
        for layer in self.layers:
            x = layer(x)
        return x

    @torch.no_grad()
    def update_grid(self, x: Tensor, grid_eps: float = 0.02, margin: float = 0.01) -> None:
        """Update each layer's grid on the activations reaching it, first to last. x: (batch, widths[0])."""
        for layer in self.layers:
            layer.update_grid(x, grid_eps=grid_eps, margin=margin)
            x = layer(x)


def build_kan(
    n_in: int,
    n_out: int,
    width: int,
    depth: int,
    grid_size: int,
    spline_order: int = 3,
    init: InitScheme | Mapping[str, Any] | str = "baseline",
    backend: BasisBackend = "auto",
) -> KAN:
    """A KAN of ``depth`` hidden layers of ``width`` units: widths [n_in, width × depth, n_out].

    The paper's grid is over (width, depth, G); e.g. [2, 4, 1] is width 4, depth 1.
    """
    if depth < 0 or width < 1:
        raise ValueError(f"need depth >= 0 and width >= 1, got depth={depth}, width={width}")
    return KAN([n_in, *[width] * depth, n_out], grid_size, spline_order, init=init, backend=backend)
