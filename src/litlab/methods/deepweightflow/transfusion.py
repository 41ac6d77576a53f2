"""TransFusion-style alignment of transformer blocks (Rinaldi et al., 2025) as DeepWeightFlow uses it.

Per block, with the residual stream left unpermuted: (1) heads of B are matched to heads of A by a LAP on
Σ_{q,k,v} ‖sv(W_h^A) − sv(W_{h'}^B)‖₂ (singular-value spectra, invariant to permutations inside a head);
(2) inside each matched head pair, one permutation of the head's dims for Q, K and V maximises
tr(Q_A Q̃_Bᵀ + K_A K̃_Bᵀ + V_A Ṽ_Bᵀ)/3; it is applied to the QKV rows and biases and to the
out-projection's columns; (3) MLP hidden units are matched by a LAP on the first layer's weights.
"""

from __future__ import annotations

import re

import torch
from scipy.optimize import linear_sum_assignment

Params = dict[str, torch.Tensor]


def _lap(cost: torch.Tensor, maximize: bool) -> torch.Tensor:
    """Column index for each row of ``cost: (n, n)``."""
    return torch.as_tensor(
        linear_sum_assignment(cost.double().numpy(), maximize=maximize)[1], dtype=torch.long
    )


def attention_permutation(qkv_a: torch.Tensor, qkv_b: torch.Tensor, heads: int) -> torch.Tensor:
    """Row order of B's fused ``qkv: (3·dim, dim)`` that aligns it to A: the head LAP, then dims per head.

    The same order, restricted to the V block, permutes the out-projection's columns.
    """
    three_dim, dim = qkv_a.shape
    head_dim = three_dim // 3 // heads
    a = qkv_a.reshape(3, heads, head_dim, dim)
    b = qkv_b.reshape(3, heads, head_dim, dim)
    sv_a, sv_b = torch.linalg.svdvals(a.double()), torch.linalg.svdvals(b.double())  # (3, heads, head_dim)
    head_cost = torch.linalg.vector_norm(sv_a[:, :, None] - sv_b[:, None, :], dim=-1).sum(0)  # (heads, heads)
    head_order = _lap(head_cost, maximize=False)
    rows = []
    for h in range(heads):
        g = int(head_order[h])
        similarity = (
            torch.einsum("mid,mjd->ij", a[:, h].double(), b[:, g].double()) / 3
        )  # (head_dim, head_dim)
        inner = _lap(similarity, maximize=True)
        rows.append(g * head_dim + inner)
    within = torch.cat(rows)  # (dim,): B's channel (head, dim) for each of A's
    return torch.cat([m * dim + within for m in range(3)])


def transfusion_align(params_a: Params, params_b: Params, heads: int) -> Params:
    """B permuted to match A block by block (attention heads, then MLP units); outputs of B unchanged.

    Expects timm ``VisionTransformer`` names (``...blocks.<i>.attn.qkv.weight``, ``...mlp.fc1.weight``).
    """
    out = dict(params_b)
    prefixes = sorted(
        {m.group(1) for k in params_a if (m := re.match(r"(.*blocks\.\d+\.)attn\.qkv\.weight$", k))}
    )
    for p in prefixes:
        rows = attention_permutation(params_a[f"{p}attn.qkv.weight"], params_b[f"{p}attn.qkv.weight"], heads)
        dim = params_b[f"{p}attn.qkv.weight"].shape[1]
        out[f"{p}attn.qkv.weight"] = params_b[f"{p}attn.qkv.weight"][rows]
        out[f"{p}attn.qkv.bias"] = params_b[f"{p}attn.qkv.bias"][rows]
        out[f"{p}attn.proj.weight"] = params_b[f"{p}attn.proj.weight"][:, rows[2 * dim :] - 2 * dim]
        fc1_a, fc1_b = params_a[f"{p}mlp.fc1.weight"], params_b[f"{p}mlp.fc1.weight"]
        units = _lap(fc1_a.double() @ fc1_b.double().T, maximize=True)
        out[f"{p}mlp.fc1.weight"] = fc1_b[units]
        out[f"{p}mlp.fc1.bias"] = params_b[f"{p}mlp.fc1.bias"][units]
        out[f"{p}mlp.fc2.weight"] = params_b[f"{p}mlp.fc2.weight"][:, units]
    return out
