"""TransFusion on a timm ViT: permuted heads, head dims and MLP units leave the logits unchanged, and a
planted permutation of all three is undone exactly."""

from __future__ import annotations

import torch

from litlab.methods.deepweightflow.architectures import build_network, network_state
from litlab.methods.deepweightflow.canonical import align_params
from litlab.methods.deepweightflow.transfusion import transfusion_align

ARCH = {"name": "vit", "dim": 24, "depth": 2, "heads": 3, "mlp_ratio": 2.0}


def _plant(params: dict[str, torch.Tensor], seed: int) -> dict[str, torch.Tensor]:
    """Random head order, per-head dim order (shared by Q, K, V) and MLP unit order in every block."""
    generator = torch.Generator().manual_seed(seed)
    dim, heads = ARCH["dim"], ARCH["heads"]
    head_dim = dim // heads
    out = dict(params)
    for block in range(ARCH["depth"]):
        p = f"vit.blocks.{block}."
        order = torch.randperm(heads, generator=generator)
        inner = [torch.randperm(head_dim, generator=generator) for _ in range(heads)]
        within = torch.cat([order[h] * head_dim + inner[h] for h in range(heads)])
        rows = torch.cat([m * dim + within for m in range(3)])
        out[p + "attn.qkv.weight"] = params[p + "attn.qkv.weight"][rows]
        out[p + "attn.qkv.bias"] = params[p + "attn.qkv.bias"][rows]
        out[p + "attn.proj.weight"] = params[p + "attn.proj.weight"][:, within]
        units = torch.randperm(params[p + "mlp.fc1.weight"].shape[0], generator=generator)
        out[p + "mlp.fc1.weight"] = params[p + "mlp.fc1.weight"][units]
        out[p + "mlp.fc1.bias"] = params[p + "mlp.fc1.bias"][units]
        out[p + "mlp.fc2.weight"] = params[p + "mlp.fc2.weight"][:, units]
    return out


def _vit(seed: int) -> tuple[torch.nn.Module, dict[str, torch.Tensor]]:
    torch.manual_seed(seed)
    net = build_network(ARCH).double().eval()
    with torch.no_grad():
        for name, param in net.named_parameters():
            if name.endswith("bias") or "norm" in name:
                param.normal_(0, 0.3)  # non-trivial biases and LayerNorm affines
    return net, network_state(net)


def test_planted_attention_permutation_keeps_logits() -> None:
    net, params = _vit(0)
    planted = _plant(params, 1)
    x = torch.rand(16, 64, dtype=torch.float64)
    outputs = torch.func.functional_call(net, planted, (x,))
    torch.testing.assert_close(outputs, net(x), atol=1e-6, rtol=0)


def test_transfusion_recovers_planted_permutation() -> None:
    _, params = _vit(2)
    recovered = transfusion_align(params, _plant(params, 3), heads=ARCH["heads"])
    for k in params:
        torch.testing.assert_close(recovered[k], params[k], atol=0, rtol=0)


def test_aligning_another_vit_keeps_its_function_and_moves_it_closer() -> None:
    net, a = _vit(4)
    _, b = _vit(5)
    aligned = align_params(ARCH, a, _plant(b, 6))
    x = torch.rand(8, 64, dtype=torch.float64)
    expected = torch.func.functional_call(net, b, (x,))
    torch.testing.assert_close(torch.func.functional_call(net, aligned, (x,)), expected, atol=1e-6, rtol=0)

    def distance(p: dict[str, torch.Tensor]) -> float:
        return sum(float((a[n] - p[n]).square().sum()) for n in a)

    assert distance(aligned) <= distance(_plant(b, 6)) + 1e-9
