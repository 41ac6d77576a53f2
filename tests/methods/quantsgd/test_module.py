"""The LightningModule performs the paper's update exactly (deterministic casts; seeded stochastic noise),
averages the iterates, trains through the Fitter, and rejects bad configs with one-line errors."""

from __future__ import annotations

import pytest
import torch

from litlab.contract import bind
from litlab.core.errors import ConfigError
from litlab.datamodules.linear_regression import LinearRegressionDataModule
from litlab.fitting import Fitter
from litlab.methods.quantsgd.module import QuantizedSGDRegressor, parse_quantizers
from litlab.methods.quantsgd.quantizers import quantize

CASTS = {
    "data": {"kind": "bf16"},
    "label": {"kind": "fp16"},
    "param": {"kind": "bf16"},
    "act": {"kind": "fp8_e4m3"},
    "grad": {"kind": "bf16"},
}


def _bound_module(
    batch: int, n_train: int = 64, **kwargs
) -> tuple[QuantizedSGDRegressor, LinearRegressionDataModule]:
    data = LinearRegressionDataModule(
        dim=8, exponent=1.0, n_train=n_train, n_val=16, n_test=16, batch_size=batch, seed=2
    )
    module = QuantizedSGDRegressor(step_size=0.1, **kwargs)
    bind(module, data)
    data.setup("fit")
    return module, data


def _manual_steps(module: QuantizedSGDRegressor, data: LinearRegressionDataModule) -> None:
    optimizer = module.configure_optimizers()
    for index, batch in enumerate(data.train_dataloader()):
        optimizer.zero_grad()
        module.training_step(batch, index).backward()
        optimizer.step()


@pytest.mark.parametrize("batch", [1, 4])
def test_module_performs_the_quantized_update_with_casts(batch: int) -> None:
    module, data = _bound_module(batch, quantizers=CASTS)
    module.log = lambda *args, **kwargs: None  # outside a Trainer
    _manual_steps(module, data)

    def cast(target: str, v: torch.Tensor) -> torch.Tensor:
        return quantize(v, CASTS[target]["kind"], 1.0, None)

    w, total = torch.zeros(8, dtype=torch.float64), torch.zeros(8, dtype=torch.float64)
    for x, y in data.train_dataloader():
        x_q = cast("data", x)
        r = cast("label", y) - cast("act", x_q @ cast("param", w))
        total += w
        w = w + 0.1 / batch * (cast("grad", r) @ x_q)
    assert torch.allclose(module.weight.detach(), w, rtol=1e-12, atol=1e-14)
    assert torch.allclose(module.averaged_weight(), total / (64 // batch), rtol=1e-12, atol=1e-14)


def test_module_draws_fresh_noise_for_every_stochastic_quantizer() -> None:
    kinds = {"data": "int", "label": "additive", "param": "fp", "act": "multiplicative", "grad": "additive"}
    quantizers = {target: {"kind": kind, "eps": 0.05} for target, kind in kinds.items()}
    module, data = _bound_module(4, quantizers=quantizers)
    module.log = lambda *args, **kwargs: None
    with torch.no_grad():
        module.weight.copy_(torch.linspace(-1, 1, 8, dtype=torch.float64))
    x, y = next(iter(data.train_dataloader()))
    w = module.weight.detach().clone()
    torch.manual_seed(7)
    module.training_step((x, y), 0).backward()
    torch.manual_seed(7)  # replay the draws in the module's order: data, label, param, act, then grad
    x_q = quantize(x, "int", 0.05, torch.rand_like(x))
    y_q = quantize(y, "additive", 0.05, torch.randn_like(y))
    p = quantize(w, "fp", 0.05, torch.rand_like(w))
    a = x_q @ p
    r = y_q - quantize(a, "multiplicative", 0.05, torch.randn_like(a))
    r_q = quantize(r, "additive", 0.05, torch.randn_like(r))
    assert torch.allclose(module.weight.grad, -(r_q @ x_q) / 4, rtol=1e-12)


def test_ablation_flags() -> None:
    module, data = _bound_module(1, quantizers=CASTS, quantize=False)
    assert not any(q.active for q in module.quantizers.values())
    last, data = _bound_module(1, averaging=False)
    last.log = lambda *args, **kwargs: None
    _manual_steps(last, data)
    assert torch.equal(last.averaged_weight(), last.weight.detach())


def test_module_trains_through_the_fitter() -> None:
    module, data = _bound_module(2, n_train=2048, quantizers={"data": {"kind": "additive", "eps": 0.01}})
    initial = module.risks()["excess_risk"].item()
    result = Fitter().fit(module, data, max_epochs=1, seed=0)
    assert result.steps == 1024
    assert result.metrics["val/excess_risk"] < 0.3 * initial
    assert (
        result.metrics["val/excess_risk_q"] > result.metrics["val/excess_risk"]
    )  # ApproxErr on quantized inputs


def test_bad_configs_are_one_line_errors() -> None:
    with pytest.raises(ConfigError, match="unknown quantization targets"):
        parse_quantizers({"weights": {"kind": "int", "eps": 0.1}})
    with pytest.raises(ConfigError, match="model.quantizers.act"):
        parse_quantizers({"act": {"kind": "int8", "eps": 0.1}})
    with pytest.raises(ConfigError, match="step_size"):
        QuantizedSGDRegressor(step_size=0.0)
    module = QuantizedSGDRegressor()
    with pytest.raises(ConfigError, match="data_spec"):
        module.bind_data({"dim": 3})
    with pytest.raises(ConfigError, match="bind_data"):
        module.configure_optimizers()
