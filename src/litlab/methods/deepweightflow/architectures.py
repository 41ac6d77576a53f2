"""The zoo's networks (MLP, small BatchNorm CNN, tiny timm ViT) and batched evaluation of many at once.

An architecture is a plain dict (``{"name": "mlp", "sizes": [64, 32, 10]}``) so it can live in a zoo's
index file; ``build_network`` turns it into an ``nn.Module`` taking flat inputs ``(batch, n_features)``.
"""

from __future__ import annotations

import torch
from timm.models.vision_transformer import VisionTransformer
from torch import nn
from torch.func import functional_call, vmap

from litlab.core.errors import LitlabError

IMAGE_SIDE = 8  # sklearn digits are 8x8


class MLP(nn.Module):
    """ReLU MLP ``sizes[0] -> ... -> sizes[-1]``; layers are ``layers.<i>``."""

    def __init__(self, sizes: list[int]) -> None:
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(a, b) for a, b in zip(sizes[:-1], sizes[1:]))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers[:-1]:
            x = torch.relu(layer(x))
        return self.layers[-1](x)


class SmallCNN(nn.Module):
    """conv3x3-BN-ReLU-maxpool2, conv3x3-BN-ReLU, global average pool, linear; input (batch, 64) as 8x8."""

    def __init__(self, channels: int = 16, n_classes: int = 10) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, channels, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1)
        self.bn2 = nn.BatchNorm2d(channels)
        self.fc = nn.Linear(channels, n_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.reshape(-1, 1, IMAGE_SIDE, IMAGE_SIDE)
        x = nn.functional.max_pool2d(torch.relu(self.bn1(self.conv1(x))), 2)
        x = torch.relu(self.bn2(self.conv2(x)))
        return self.fc(x.mean((2, 3)))


class TinyViT(nn.Module):
    """timm ``VisionTransformer`` on 8x8 digits (patch 2, mean-pooled tokens); the attention case."""

    def __init__(
        self, dim: int = 32, depth: int = 2, heads: int = 2, mlp_ratio: float = 2.0, n_classes: int = 10
    ) -> None:
        super().__init__()
        self.vit = VisionTransformer(
            img_size=IMAGE_SIDE,
            patch_size=2,
            in_chans=1,
            num_classes=n_classes,
            embed_dim=dim,
            depth=depth,
            num_heads=heads,
            mlp_ratio=mlp_ratio,
            class_token=False,
            global_pool="avg",
        )
        for block in self.vit.blocks:
            block.attn.fused_attn = False  # plain matmuls batch under vmap; the fused CPU kernel does not

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.vit(x.reshape(-1, 1, IMAGE_SIDE, IMAGE_SIDE))


PRESETS = {
    "mlp_64_32_10": {"name": "mlp", "sizes": [64, 32, 10]},
    "mlp_4_16_3": {"name": "mlp", "sizes": [4, 16, 3]},
    "cnn_8": {"name": "cnn", "channels": 8},
    "vit_32_d2_h2": {"name": "vit", "dim": 32, "depth": 2, "heads": 2, "mlp_ratio": 2.0},
}


def resolve_arch(arch: str | dict) -> dict:
    """A preset name from ``PRESETS`` (so a command-line override is one word) or an architecture dict."""
    if isinstance(arch, str):
        if arch not in PRESETS:
            raise LitlabError(f"unknown architecture preset {arch!r}; choose one of {', '.join(PRESETS)}")
        return dict(PRESETS[arch])
    return dict(arch)


def build_network(arch: dict) -> nn.Module:
    """``{"name": "mlp", "sizes": [...]}``, ``{"name": "cnn", "channels": c}`` or ``{"name": "vit", ...}``."""
    kwargs = {k: v for k, v in arch.items() if k != "name"}
    builders = {"mlp": MLP, "cnn": SmallCNN, "vit": TinyViT}
    if arch.get("name") not in builders:
        raise LitlabError(f"unknown architecture {arch.get('name')!r}; choose one of {', '.join(builders)}")
    return builders[arch["name"]](**kwargs)


def network_state(net: nn.Module) -> dict[str, torch.Tensor]:
    """Parameters and float buffers (BatchNorm running statistics) by state-dict name."""
    return {k: v.detach().clone() for k, v in net.state_dict().items() if v.is_floating_point()}


def init_zoo_params(arch: dict, seeds: list[int]) -> dict[str, torch.Tensor]:
    """PyTorch's default initialisation of one network per seed, stacked: ``{name: (n, ...)}``."""
    states = []
    for seed in seeds:
        with torch.random.fork_rng():
            torch.manual_seed(seed)
            states.append(network_state(build_network(arch)))
    return {k: torch.stack([s[k] for s in states]) for k in states[0]}


def batched_logits(net: nn.Module, params: dict[str, torch.Tensor], x: torch.Tensor) -> torch.Tensor:
    """Logits of every stacked network on shared inputs ``x: (batch, f)`` -> ``(n, batch, classes)``.

    Runs ``net`` (a template of the architecture) in its current train/eval mode; in train mode
    BatchNorm running statistics in ``params`` are updated in place.
    """
    return vmap(lambda p, xs: functional_call(net, p, (xs,)), in_dims=(0, None))(params, x)


@torch.no_grad()
def recompute_batchnorm(
    arch: dict, params: dict[str, torch.Tensor], x: torch.Tensor
) -> dict[str, torch.Tensor]:
    """Set every BatchNorm's running mean/var to the statistics of ``x: (n_samples, f)`` (full batch),
    as the paper does for generated ResNets; networks without BatchNorm come back unchanged."""
    net = build_network(arch)
    if not any(isinstance(m, nn.modules.batchnorm._BatchNorm) for m in net.modules()):
        return params
    for module in net.modules():
        if isinstance(module, nn.modules.batchnorm._BatchNorm):
            module.momentum = 1.0  # running stat := this batch's statistic
    params = {k: v.clone() for k, v in params.items()}
    batched_logits(net.train(), params, x)
    return params


@torch.no_grad()
def zoo_accuracy(
    arch: dict, params: dict[str, torch.Tensor], x: torch.Tensor, y: torch.Tensor
) -> torch.Tensor:
    """Test accuracy of each stacked network: ``(n,)``."""
    logits = batched_logits(build_network(arch).eval(), params, x)
    return (logits.argmax(-1) == y).float().mean(1)
