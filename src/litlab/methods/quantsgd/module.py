"""Quantized one-pass SGD with iterate averaging as a LightningModule (one setting, one seed).

The batched simulator (``simulator.py``) is how the studies run thousands of (setting, seed) pairs; this
module runs the same algorithm through Lightning, so one setting trains with ``litlab-train`` (loggers,
checkpoints, SLURM, wandb sweeps) and its risk curve is plotted against the bound. The update is written
as autograd so that a plain ``torch.optim.SGD(lr=γ)`` performs it exactly:

    p = Q_p(w) (straight-through), a = Q_d(X)·p, a_q = Q_a(a) (straight-through),
    loss = ½·mean_b (a_q − Q_l(y))², and the gradient reaching a_q, −r/B, is replaced by −Q_o(r)/B,

so w ← w − γ·∇ = w + (γ/B)·Q_d(X)ᵀQ_o(Q_l(y) − Q_a(Q_d(X)Q_p(w))), the paper's step. Quantizer noise comes
from torch's global generator (seeded by the run). The averaged iterate w̄ = mean of w_0..w_{t−1} is kept
in buffers; validation reports its exact population risks (clean and on quantized inputs).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Mapping
from typing import Any

import lightning as L
import matplotlib.pyplot as plt
import torch
from matplotlib.figure import Figure

from litlab.core.errors import ConfigError
from litlab.methods.quantsgd.bounds import quantized_bound
from litlab.methods.quantsgd.moments import DataMoments, data_moments
from litlab.methods.quantsgd.quantizers import NOISE, Quantizer, quantize
from litlab.methods.quantsgd.simulator import TARGETS, Problem, Setting

SPEC_KEYS = ("dim", "exponent", "noise_std", "w_star_value", "batch_size")


class _QuantizeGradient(torch.autograd.Function):
    """Identity forward; backward maps the gradient g = −r/B of the activation to −Q_o(r)/B."""

    @staticmethod
    def forward(ctx: Any, a: torch.Tensor, quantizer: Callable[[torch.Tensor], torch.Tensor], batch: int):
        ctx.quantizer, ctx.batch = quantizer, batch
        return a.view_as(a)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor):
        return -ctx.quantizer(-grad * ctx.batch) / ctx.batch, None, None


def parse_quantizers(quantizers: Mapping[str, Any] | None) -> dict[str, Quantizer]:
    """``{target: {kind, eps}}`` from a config as Quantizers; unknown targets or kinds are a ConfigError."""
    quantizers = dict(quantizers or {})
    unknown = sorted(set(quantizers) - set(TARGETS))
    if unknown:
        raise ConfigError(f"unknown quantization targets {unknown}; choose among {list(TARGETS)}")
    parsed = {}
    for target in TARGETS:
        spec = dict(quantizers.get(target) or {})
        try:
            parsed[target] = Quantizer(str(spec.get("kind", "none")), float(spec.get("eps", 0.0)))
        except ValueError as error:
            raise ConfigError(f"model.quantizers.{target}: {error}") from error
    return parsed


class QuantizedSGDRegressor(L.LightningModule):
    """Linear regression by one-pass quantized SGD with iterate averaging (Zhang, Su & Zou, ICLR 2026).

    Args:
        step_size: γ (constant).
        quantizers: ``{data|label|param|act|grad: {kind, eps}}`` (kinds of ``quantizers.KINDS``).
        quantize: False switches every quantizer off (the full-precision SGD baseline).
        averaging: False reports the last iterate instead of the iterate average.
    """

    def __init__(
        self,
        step_size: float = 0.05,
        quantizers: Mapping[str, Any] | None = None,
        quantize: bool = True,
        averaging: bool = True,
    ) -> None:
        super().__init__()
        if not step_size > 0:
            raise ConfigError(f"model.step_size must be positive, got {step_size}")
        self.save_hyperparameters(logger=False)
        self.step_size = step_size
        self.averaging = averaging
        parsed = parse_quantizers(quantizers)
        self.quantizers = parsed if quantize else parse_quantizers({})
        self.history: list[dict[str, float]] = []
        self.weight: torch.nn.Parameter | None = None

    def bind_data(self, spec: Mapping[str, Any]) -> None:
        """Build w (zeros, the paper's w_0) in the data's dtype, and what the exact risks need."""
        missing = [key for key in SPEC_KEYS if key not in spec]
        if missing:
            raise ConfigError(
                f"QuantizedSGDRegressor needs a data_spec with {missing} (LinearRegressionDataModule)"
            )
        self.problem = Problem(float(spec["exponent"]), float(spec["noise_std"]), float(spec["w_star_value"]))
        self.setting = Setting(int(spec["dim"]), int(spec["batch_size"]), self.step_size, **self.quantizers)
        dtype = spec["spectrum"].dtype if "spectrum" in spec else torch.float64
        dim = self.setting.dim
        self.weight = torch.nn.Parameter(torch.zeros(dim, dtype=dtype))
        self.register_buffer("weight_sum", torch.zeros(dim, dtype=dtype))
        self.register_buffer("n_averaged", torch.zeros((), dtype=torch.long))
        self.register_buffer("sup_norm", torch.zeros((), dtype=dtype))
        self.register_buffer("sup_dev", torch.zeros((), dtype=dtype))
        self.register_buffer("spectrum", self.problem.spectrum(dim, dtype))
        self.register_buffer("w_star", self.problem.w_star(dim, dtype))
        moments = data_moments(self.quantizers["data"], self.spectrum)
        self.register_buffer("data_second", moments.second)
        self.register_buffer("data_cross", moments.cross)
        self.data_kurtosis = moments.kurtosis

    @property
    def moments(self) -> DataMoments:
        """Moments of the quantized data (on the module's device)."""
        return DataMoments(self.data_second, self.data_cross, self.data_kurtosis)

    def _q(self, target: str, x: torch.Tensor) -> torch.Tensor:
        """Q_target(x) with fresh noise from the global generator."""
        quantizer = self.quantizers[target]
        if not quantizer.active:
            return x
        noise = None
        if quantizer.kind in NOISE:
            noise = torch.randn_like(x) if NOISE[quantizer.kind] == "normal" else torch.rand_like(x)
        return quantize(x, quantizer.kind, quantizer.eps, noise)

    def averaged_weight(self) -> torch.Tensor:
        """w̄ (the mean of the iterates used so far), or the current w without averaging or before a step."""
        if not self.averaging or int(self.n_averaged) == 0:
            return self.weight.detach()
        return self.weight_sum / self.n_averaged

    def training_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> torch.Tensor:
        self._require_bound()
        x, y = batch
        w = self.weight
        with torch.no_grad():
            self._track(w.detach())
        x_q, y_q = self._q("data", x), self._q("label", y)
        p = w + (self._q("param", w.detach()) - w.detach())
        a = x_q @ p
        a_q = a + (self._q("act", a.detach()) - a.detach())
        if self.quantizers["grad"].active:
            a_q = _QuantizeGradient.apply(a_q, lambda r: self._q("grad", r), len(x))
        loss = 0.5 * (a_q - y_q).square().mean()
        self.log("train/loss", loss.detach(), on_step=False, on_epoch=True, batch_size=len(x))
        return loss

    @torch.no_grad()
    def _track(self, w: torch.Tensor) -> None:
        """Add w_t to the average, and keep the sups the bound's multiplicative terms use."""
        self.weight_sum += w
        self.n_averaged += 1
        second, w_q = self.data_second, self.moments.optimum(self.w_star)
        self.sup_norm.copy_(torch.maximum(self.sup_norm, (second * w**2).sum()))
        self.sup_dev.copy_(torch.maximum(self.sup_dev, (second * (w - w_q) ** 2).sum()))

    def risks(self) -> dict[str, torch.Tensor]:
        """Exact population risks of the reported iterate: clean and on quantized test inputs."""
        w_bar = self.averaged_weight()
        return {
            "excess_risk": (self.spectrum * (w_bar - self.w_star) ** 2).sum(),
            "excess_risk_q": self.moments.quantized_risk(w_bar, self.spectrum, self.w_star),
        }

    def _eval_step(self, batch: tuple[torch.Tensor, torch.Tensor], stage: str) -> None:
        self._require_bound()
        x, y = batch
        w_bar = self.averaged_weight()
        metrics = {f"{stage}/{k}": v for k, v in self.risks().items()}
        metrics[f"{stage}/mse"] = (x @ w_bar - y).square().mean()
        metrics[f"{stage}/mse_q"] = (self._q("data", x) @ w_bar - y).square().mean()
        self.log_dict(metrics, batch_size=len(x))

    def validation_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> None:
        self._eval_step(batch, "val")

    def on_validation_epoch_end(self) -> None:
        trainer = self._trainer  # None under the Fitter (Fabric), which has no sanity check
        if self.weight is None or (trainer is not None and trainer.sanity_checking):
            return
        risks = {k: float(v) for k, v in self.risks().items()}
        self.history.append({"step": float(self.global_step), **risks})

    def test_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> None:
        self._eval_step(batch, "test")

    def configure_optimizers(self) -> torch.optim.Optimizer:
        self._require_bound()
        return torch.optim.SGD([self.weight], lr=self.step_size)

    def logged_metrics(self) -> Collection[str]:
        names = ("excess_risk", "excess_risk_q", "mse", "mse_q")
        return ["train/loss", *(f"{stage}/{n}" for stage in ("val", "test") for n in names)]

    def _require_bound(self) -> None:
        if self.weight is None:
            raise ConfigError("QuantizedSGDRegressor is built by bind_data(data.data_spec()) before training")

    def figures(self, stage: str) -> dict[str, Figure]:
        """The averaged iterate's risk at each validation, with the paper's bound where it applies."""
        points = [h for h in self.history if h["step"] > 0]
        if stage != "fit" or not points:
            return {}
        steps = [int(h["step"]) for h in points]
        fig, ax = plt.subplots(figsize=(5, 3.6))
        ax.loglog(steps, [h["excess_risk"] for h in points], "o-", label="clean risk")
        ax.loglog(steps, [h["excess_risk_q"] for h in points], "s-", label="quantized-input risk")
        bound = quantized_bound(
            self.problem, self.setting, self.moments, steps, float(self.sup_norm), float(self.sup_dev)
        )
        if bound.valid and all(math.isfinite(v) for v in bound.excess.tolist()):
            ax.loglog(steps, bound.excess.tolist(), "k--", label="bound (clean)")
            ax.loglog(steps, bound.excess_q.tolist(), "k:", label="bound (quantized)")
        ax.set_xlabel("SGD steps N")
        ax.set_ylabel("excess risk of the averaged iterate")
        ax.set_title(self.setting.name, fontsize=9)
        ax.legend(fontsize=8)
        fig.tight_layout()
        return {"risk_curve": fig}
