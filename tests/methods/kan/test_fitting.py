"""The KAN fits go through litlab's Fitter and still equal the paper's hand-written full-batch loop."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from litlab.datamodules.functions import evaluate, get_function, sample_uniform
from litlab.fitting import Fitter
from litlab.methods.kan.fitting import fit_full_batch, regressor
from litlab.methods.kan.layers import build_kan


def _hand_loop(net: torch.nn.Module, x: torch.Tensor, y: torch.Tensor, epochs: int) -> list[float]:
    """The loop the study used before the Fitter (the paper's): full-batch Adam 1e-3 on MSE."""
    optimizer = torch.optim.Adam(net.parameters(), lr=1e-3)
    losses = []
    for _ in range(epochs):
        optimizer.zero_grad(set_to_none=True)
        loss = F.mse_loss(net(x), y)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


def test_fitter_equals_the_hand_loop_bit_for_bit() -> None:
    x = sample_uniform(200, 2, seed=3)
    y = evaluate(get_function("f2"), x)
    nets = []
    for _ in range(2):
        torch.manual_seed(0)
        nets.append(
            build_kan(
                2, 1, width=6, depth=2, grid_size=5, init={"name": "power", "alpha": 0.25, "beta": 1.75}
            )
        )
    losses = _hand_loop(nets[0], x, y, epochs=25)
    result = fit_full_batch(Fitter(), regressor(nets[1]), x, y, epochs=25)
    assert result.steps == 25 and result.epochs == 25
    for ours, theirs in zip(nets[1].parameters(), nets[0].parameters(), strict=True):
        assert torch.equal(ours, theirs)
    assert [row["train/loss"] for row in result.history] == losses
