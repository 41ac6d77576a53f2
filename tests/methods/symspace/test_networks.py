"""The U-Net's condition paths: layer-normalised condition and condition input channels."""

from __future__ import annotations

import torch
from torch import nn

from litlab.methods.symspace.networks import ConditionalUNet


def randomised_unet(**options) -> ConditionalUNet:
    """A 16-dim-condition U-Net whose zero-initialised layers (AdaGN, output conv) are made random."""
    torch.manual_seed(0)
    unet = ConditionalUNet(1, 16, width=8, embed_dim=16, **options)
    for module in unet.modules():
        if isinstance(module, (nn.Linear, nn.Conv2d)):
            nn.init.normal_(module.weight, std=0.2)
    return unet.eval()


def inputs() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(1)
    return (
        torch.rand(3, generator=generator),
        torch.randn(3, 1, 8, 8, generator=generator),
        torch.randn(3, 16, generator=generator),
    )


def test_normalised_condition_is_invariant_to_its_scale_and_offset() -> None:
    t, x, cond = inputs()
    unet = randomised_unet(normalize_condition=True)
    for scale, offset in ((3.0, 0.5), (0.2, -1.0)):
        torch.testing.assert_close(unet(t, x, scale * cond + offset), unet(t, x, cond), atol=1e-3, rtol=1e-3)
    plain = randomised_unet()
    assert (plain(t, x, 0.2 * cond) - plain(t, x, cond)).abs().max() > 1e-2


def test_condition_channels_feed_the_stem() -> None:
    t, x, cond = inputs()
    unet = randomised_unet(condition_channels=4)
    assert unet.stem.in_channels == 1 + 4 + 4
    cond.requires_grad_(True)
    unet(t, x, cond).sum().backward()
    channel_grad = unet.condition_channels.weight.grad
    assert channel_grad is not None and channel_grad.abs().sum() > 0
    assert cond.grad.abs().sum() > 0
