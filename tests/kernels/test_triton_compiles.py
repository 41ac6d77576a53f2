"""Every Triton kernel compiles for a Hopper GPU (sm_90) on a machine without one: Triton's front end and
its bundled ptxas run on the CPU, so a kernel that only the interpreter accepts fails here, not on the GPU.
(The B-spline kernel once looped to a ``tl.static_range`` end that the compiler did not see as constant.)"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(importlib.util.find_spec("triton") is None, reason="triton is not installed")

# kernel, its pointer/scalar signature, and the constexpr values of each specialisation the code launches
KERNELS = {
    "litlab.kernels.bspline_triton:_bspline_kernel": (
        {"x_ptr": "*fp32", "grid_ptr": "*fp32", "out_ptr": "*fp32", "n_rows": "i32", "n_in": "i32"}
        | {"n_knots": "i32", "n_basis": "i32"},
        [
            {"K": 3, "DERIVATIVE": False, "WIDTH": 16, "BLOCK_ROWS": 64, "LAST": 3},
            {"K": 3, "DERIVATIVE": True, "WIDTH": 16, "BLOCK_ROWS": 64, "LAST": 2},
            {"K": 0, "DERIVATIVE": True, "WIDTH": 8, "BLOCK_ROWS": 128, "LAST": -1},
        ],
    ),
    "litlab.kernels.block_sparse_attention_triton:_block_sparse_kernel": (
        {"q_ptr": "*bf16", "k_ptr": "*bf16", "v_ptr": "*bf16", "out_ptr": "*bf16", "idx_ptr": "*i32"}
        | {"count_ptr": "*i32", "length": "i32", "n_q": "i32", "width": "i32", "scale": "fp32"},
        [{"BLOCK": 64, "DIM": 64}, {"BLOCK": 128, "DIM": 64}],
    ),
}


def _compile_all() -> None:
    import importlib

    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    for name, (signature, specialisations) in KERNELS.items():
        module, attr = name.split(":")
        kernel = getattr(importlib.import_module(module), attr)
        for constants in specialisations:
            full = signature | dict.fromkeys(constants, "constexpr")
            order = list(full)
            constexprs = {(order.index(key),): value for key, value in constants.items()}
            source = ASTSource(fn=kernel, signature=full, constexprs=constexprs)
            compiled = triton.compile(source, target=GPUTarget("cuda", 90, 32))
            assert compiled.asm["ptx"], f"{name} {constants}: no PTX"


def test_every_triton_kernel_compiles_for_sm90_without_a_gpu() -> None:
    """In a fresh process without ``TRITON_INTERPRET``, so the kernels are real JIT functions."""
    env = {key: value for key, value in os.environ.items() if key != "TRITON_INTERPRET"}
    code = "from tests.kernels.test_triton_compiles import _compile_all; _compile_all()"
    result = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-3000:]
