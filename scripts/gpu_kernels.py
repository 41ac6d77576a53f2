"""The compiled kernels of ``litlab.kernels`` against their torch references on a GPU (for gpu_check.py).

The repository's kernel tests run Triton under ``TRITON_INTERPRET=1`` on CPU tensors; these run the real
compiled kernels. Each check returns its max errors and the tolerance of its arithmetic class: float32
paths 1e-4, TF32 matrix products (Triton's float32 ``tl.dot``) 1e-2, bfloat16 5e-2 (absolute, outputs of
order 1); a relative error where the magnitude grows with the inputs (spline x-gradients). Each check
takes the device; ``cpu`` with ``TRITON_INTERPRET=1`` dry-runs them all.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch

TOLERANCE = {"float32": 1e-4, "tf32": 1e-2, "bfloat16": 5e-2}


def _max_error(got: torch.Tensor, want: torch.Tensor) -> float:
    return (got.float() - want.float()).abs().max().item()


def bspline_triton(device: str) -> dict[str, Any]:
    """Triton B-spline basis, derivative basis and x-gradient (Triton backward) vs Cox–de Boor in torch."""
    from litlab.kernels.bspline import bspline_basis, bspline_basis_derivative, make_uniform_grid
    from litlab.kernels.bspline_triton import bspline_basis_derivative_triton, bspline_basis_triton

    gen = torch.Generator(device=device).manual_seed(0)
    grid = make_uniform_grid(16, 20, 3, dtype=torch.float32, device=device)
    x = (2 * torch.rand(8192, 16, device=device, generator=gen) - 1).requires_grad_()
    basis, reference = bspline_basis_triton(x, grid, 3), bspline_basis(x, grid, 3)
    weights = torch.randn(reference.shape, device=device, generator=gen)
    (gradient,) = torch.autograd.grad((basis * weights).sum(), x)  # no graph kept: the Triton derivative
    (gradient_ref,) = torch.autograd.grad((reference * weights).sum(), x)
    derivative = bspline_basis_derivative_triton(x.detach(), grid, 3)
    derivative_ref = bspline_basis_derivative(x.detach(), grid, 3)
    errors = {
        "basis": _max_error(basis, reference),
        "derivative_over_grid_size": _max_error(derivative, derivative_ref) / 20,
        "x_gradient_relative": _max_error(gradient, gradient_ref) / gradient_ref.abs().max().item(),
    }
    return {"max_errors": errors, "tolerance": TOLERANCE["float32"]}


def block_sparse_attention_triton(device: str) -> dict[str, Any]:
    """Triton block-sparse attention (float32 inputs: TF32 products; bfloat16) vs SDPA under the mask."""
    from litlab.kernels.block_sparse_attention import dense_block_attention
    from litlab.kernels.block_sparse_attention_triton import triton_block_attention

    errors, tolerances = {}, {}
    for dtype, tolerance, (heads, length, dim, block) in (
        (torch.float32, "tf32", (4, 2048, 64, 64)),
        (torch.bfloat16, "bfloat16", (8, 4096, 128, 128)),
    ):
        gen = torch.Generator(device=device).manual_seed(length)
        q, k, v = (torch.randn(1, heads, length, dim, device=device, generator=gen) for _ in range(3))
        n = math.ceil(length / block)
        mask = torch.rand(1, heads, n, n, device=device, generator=gen) < 0.3
        mask[0, 0, -1] = False  # a query block without keys must come out 0
        reference = dense_block_attention(q, k, v, mask, block)  # float32 reference for both
        name = f"{dtype}".removeprefix("torch.")
        errors[name] = _max_error(
            triton_block_attention(*(t.to(dtype) for t in (q, k, v)), mask, block), reference
        )
        tolerances[name] = TOLERANCE[tolerance]
    return {"max_errors": errors, "tolerance": tolerances}


def block_sparse_attention_gather(device: str) -> dict[str, Any]:
    """The pure-torch gather kernel on CUDA (float32, with its x-gradient) vs SDPA under the mask."""
    from litlab.kernels.block_sparse_attention import dense_block_attention, gather_block_attention

    gen = torch.Generator(device=device).manual_seed(1)
    q, k, v = (torch.randn(2, 4, 1000, 64, device=device, generator=gen).requires_grad_() for _ in range(3))
    mask = torch.rand(2, 4, 16, 16, device=device, generator=gen) < 0.3
    out, reference = gather_block_attention(q, k, v, mask, 64), dense_block_attention(q, k, v, mask, 64)
    weights = torch.randn(out.shape, device=device, generator=gen)
    grads = torch.autograd.grad((out * weights).sum(), (q, k, v))
    grads_ref = torch.autograd.grad((reference * weights).sum(), (q, k, v))
    errors = {"output": _max_error(out, reference)}
    errors |= {f"grad_{n}": _max_error(g, r) for n, g, r in zip("qkv", grads, grads_ref)}
    return {"max_errors": errors, "tolerance": TOLERANCE["float32"]}


def gaussian_splatting(device: str) -> dict[str, Any]:
    """Tiled 3DGS rasteriser on CUDA vs the dense reference and vs itself on the CPU (2000 Gaussians)."""
    from litlab.datamodules.uav.geometry import Intrinsics, nadir_rotation
    from litlab.kernels.gaussian_splatting import (
        Camera,
        covariance_3d,
        project,
        rasterize,
        rasterize_dense,
        render,
        sh_colour,
    )

    k = Intrinsics.from_fov(64, 48, 53.0)
    gen = torch.Generator().manual_seed(0)
    n = 2000
    scene = {
        "means": torch.cat([torch.rand(n, 2, generator=gen) * 40 - 20, torch.rand(n, 1, generator=gen)], 1),
        "quaternions": torch.randn(n, 4, generator=gen),
        "log_scales": torch.log(0.2 + 0.4 * torch.rand(n, 3, generator=gen)),
        "opacity_logits": torch.randn(n, generator=gen),
        "sh": 0.3 * torch.randn(n, 4, 3, generator=gen),
    }

    def camera(device: str) -> Camera:
        rotation, centre = nadir_rotation(torch.tensor(0.3)), torch.tensor([0.0, 0.0, 40.0])
        return Camera(rotation.to(device), centre.to(device), k.fx, k.fy, k.cx, k.cy, k.width, k.height)

    on_device = {name: value.to(device) for name, value in scene.items()}
    cam = camera(device)
    projected = project(
        on_device["means"], covariance_3d(on_device["quaternions"], on_device["log_scales"]), cam
    )
    colours = sh_colour(
        on_device["sh"], torch.nn.functional.normalize(on_device["means"] - cam.centre, dim=-1)
    )
    opacities = torch.sigmoid(on_device["opacity_logits"])
    splatted = rasterize(projected, opacities, colours, k.width, k.height)
    dense = rasterize_dense(projected, opacities, colours, k.width, k.height)
    cpu = render(**scene, camera=camera("cpu"))
    errors = {
        "rasterize_vs_dense_rgb": _max_error(splatted[0], dense[0]),
        "rasterize_vs_dense_opacity": _max_error(splatted[2], dense[2]),
        "device_vs_cpu_rgb": _max_error(render(**on_device, camera=cam)[0].cpu(), cpu[0]),
    }
    return {"max_errors": errors, "tolerance": TOLERANCE["float32"]}


CHECKS: dict[str, Callable[[str], dict[str, Any]]] = {
    "bspline_triton": bspline_triton,
    "block_sparse_attention_triton": block_sparse_attention_triton,
    "block_sparse_attention_gather": block_sparse_attention_gather,
    "gaussian_splatting": gaussian_splatting,
}


def passed(record: dict[str, Any]) -> bool:
    """Whether every error is within its tolerance (one tolerance for all, or one per error)."""
    tolerance = record["tolerance"]
    return all(
        math.isfinite(error) and error <= (tolerance[name] if isinstance(tolerance, dict) else tolerance)
        for name, error in record["max_errors"].items()
    )
