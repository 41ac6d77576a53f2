"""Block-sparse attention: the gather path (values and gradients), eager flex_attention and the Triton kernel
(under TRITON_INTERPRET=1, in a fresh process) all equal dense SDPA under the expanded block mask."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import warnings

import pytest
import torch

from litlab.kernels.block_sparse_attention import (
    block_indices,
    dense_block_attention,
    expand_block_mask,
    flex_block_attention,
    gather_block_attention,
)

# (batch, heads, q_len, kv_len, head dim, block): aligned, ragged last block, a suffix of queries.
SHAPES = [(2, 3, 64, 64, 8, 16), (1, 2, 50, 50, 8, 16), (2, 2, 21, 50, 8, 16), (1, 1, 7, 33, 4, 8)]


def _inputs(
    shape: tuple[int, ...], seed: int, dtype: torch.dtype = torch.float32
) -> tuple[torch.Tensor, ...]:
    batch, heads, q_len, kv_len, dim, block = shape
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(batch, heads, q_len, dim, generator=gen, dtype=dtype)
    k, v = (torch.randn(batch, heads, kv_len, dim, generator=gen, dtype=dtype) for _ in range(2))
    n = -(-kv_len // block)
    mask = torch.rand(batch, heads, n, n, generator=gen) < 0.4
    mask[0, 0, -1] = False  # a query block with no key at all outputs 0
    return q, k, v, mask


def test_expand_block_mask_takes_the_last_query_rows() -> None:
    mask = torch.tensor([[[[True, False], [False, True]]]])
    full = expand_block_mask(mask, 2, 4, 4)[0, 0]
    assert full.tolist() == [[1, 1, 0, 0], [1, 1, 0, 0], [0, 0, 1, 1], [0, 0, 1, 1]]
    assert torch.equal(expand_block_mask(mask, 2, 1, 4)[0, 0], full[-1:])


def test_block_indices_pad_to_the_largest_count() -> None:
    mask = torch.tensor([[True, False, True, True], [False, True, False, False], [False] * 4])
    indices, valid = block_indices(mask)
    assert indices.tolist() == [[0, 2, 3], [1, 0, 0], [0, 0, 0]]
    assert valid.tolist() == [[True, True, True], [True, False, False], [False, False, False]]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("with_token_mask", [False, True])
def test_gather_equals_dense_values_and_gradients(shape: tuple[int, ...], with_token_mask: bool) -> None:
    q, k, v, mask = _inputs(shape, seed=sum(shape))
    token_mask = None
    if with_token_mask:  # padding-like mask, ANDed with the block pattern
        token_mask = (
            torch.rand(shape[0], 1, shape[2], shape[3], generator=torch.Generator().manual_seed(1)) < 0.8
        )
    inputs = [t.clone().requires_grad_() for t in (q, k, v)]
    reference = dense_block_attention(*inputs, mask, shape[-1], token_mask=token_mask)
    grads_ref = torch.autograd.grad(reference.square().sum(), inputs)
    out = gather_block_attention(*inputs, mask, shape[-1], token_mask=token_mask, q_block_chunk=2)
    grads = torch.autograd.grad(out.square().sum(), inputs)
    assert not reference.isnan().any()
    torch.testing.assert_close(out, reference, atol=1e-5, rtol=0)
    empty = ~expand_block_mask(mask, shape[-1], shape[2], shape[3]).any(-1)  # the last query block of head 0
    assert empty[0, 0, -1] and (out[empty[..., None].expand_as(out)] == 0).all()
    for got, want in zip(grads, grads_ref):
        torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


def test_gather_saves_work_when_every_row_keeps_k_blocks() -> None:
    """A top-k table (the SparseD case) needs no padding mask: every gathered key is a kept key."""
    q, k, v, _ = _inputs((1, 2, 64, 64, 8, 16), seed=3)
    scores = torch.rand(1, 2, 4, 4, generator=torch.Generator().manual_seed(4))
    mask = torch.zeros(1, 2, 4, 4, dtype=torch.bool).scatter_(-1, scores.topk(2, -1).indices, True)
    torch.testing.assert_close(
        gather_block_attention(q, k, v, mask, 16), dense_block_attention(q, k, v, mask, 16), atol=1e-5, rtol=0
    )


@pytest.mark.parametrize("shape", [s for s in SHAPES if s[2] == s[3]])
def test_flex_attention_equals_dense(shape: tuple[int, ...]) -> None:
    q, k, v, mask = _inputs(shape, seed=7)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # eager flex warns that it is not compiled
        out = flex_block_attention(q, k, v, mask, shape[-1])
    torch.testing.assert_close(out, dense_block_attention(q, k, v, mask, shape[-1]), atol=1e-5, rtol=0)


def test_bad_inputs_fail_with_one_line() -> None:
    q, k, v, mask = _inputs(SHAPES[0], seed=0)
    with pytest.raises(ValueError, match="bool"):
        gather_block_attention(q, k, v, mask.float(), 16)
    with pytest.raises(ValueError, match="too few"):
        gather_block_attention(q, k, v, mask[..., :2], 16)


@pytest.mark.skipif(importlib.util.find_spec("triton") is None, reason="triton is not installed")
def test_triton_kernel_matches_dense_under_interpreter() -> None:
    """TRITON_INTERPRET must be set before triton decorates the kernel, so this runs in a fresh process."""
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    result = subprocess.run([sys.executable, __file__], env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr


def _check_triton_against_dense() -> None:
    from litlab.kernels.block_sparse_attention_triton import triton_block_attention

    torch.set_num_threads(1)
    for shape in [(1, 2, 64, 64, 16, 16), (2, 1, 40, 40, 16, 16), (1, 1, 96, 96, 32, 32)]:
        q, k, v, mask = _inputs(shape, seed=11)
        out = triton_block_attention(q, k, v, mask, shape[-1])
        torch.testing.assert_close(out, dense_block_attention(q, k, v, mask, shape[-1]), atol=1e-5, rtol=0)
    try:
        triton_block_attention(q, k, v, mask, 24)
    except ValueError:
        return
    raise AssertionError("a block of 24 must be refused")


if __name__ == "__main__":
    if os.environ.get("TRITON_INTERPRET") != "1":
        sys.exit("run with TRITON_INTERPRET=1")
    _check_triton_against_dense()
