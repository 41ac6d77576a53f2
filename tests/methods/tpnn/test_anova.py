"""ANOVA-TPNN: the component layout, sum-to-zero constants frozen for evaluation, training by the Fitter."""

from __future__ import annotations

from math import comb

import torch

from litlab.datamodules.tabular import TabularDataModule
from litlab.fitting import Fitter
from litlab.methods.tpnn.anova import ANOVATPNN, subsets_up_to
from litlab.methods.tpnn.basis import basis, by_variable
from litlab.methods.tpnn.module import ANOVATPNNRegressor


def test_every_component_up_to_the_order_is_there() -> None:
    net = ANOVATPNN(5, order=2, n_basis=3)
    assert net.n_components == 5 + comb(5, 2) and len(net.vars) == 3 * net.n_components
    assert len(subsets_up_to(6, 3)) == 6 + 15 + 20


def test_forward_is_the_sum_of_its_components_and_constants_freeze() -> None:
    torch.manual_seed(0)
    net = ANOVATPNN(4, order=2, n_basis=2)
    x = torch.rand(64, 4)
    net.train()
    out = net(x)
    c = net.c.clone()
    xt = by_variable(x)
    phi = basis(xt, net.vars, net.b, net.log_gamma, c)
    # main-effect nodes (one factor each) average to zero over the training batch
    assert torch.allclose(phi[:, : 4 * 2].mean(0), torch.zeros(8), atol=1e-5)
    assert torch.allclose(out, net.intercept + phi @ net.beta, atol=1e-6)
    net.eval()
    x_new = torch.rand(5, 4)
    assert torch.allclose(
        net(x_new), net.intercept + basis(by_variable(x_new), net.vars, net.b, net.log_gamma, c) @ net.beta
    )
    norms = net.component_norms(x)
    manual = (phi * net.beta).reshape(64, net.n_components, 2).sum(-1).square().mean(0).sqrt()
    assert torch.allclose(norms, manual, atol=1e-6)


def test_the_fitter_trains_it_on_tabular_data() -> None:
    data = TabularDataModule("friedman1", n_samples=300, n_features=6, seed=0)
    model = ANOVATPNNRegressor(order=2, n_basis=3, lr=0.02)
    model.bind_data(data.data_spec())
    result = Fitter().fit(model, data, max_epochs=60, val_every_n_steps=20, seed=0)
    history = [row["val/rmse"] for row in result.history]
    assert history[-1] < 0.6 * history[0]
    norms = model.component_norms(data.scaling.x(data.load().x_train).float())
    largest = max(norms, key=norms.get)
    assert largest in {(0,), (1,), (3,), (0, 1)}  # friedman1's strongest terms
