"""Excess-risk upper bounds: Zou et al.'s for SGD with averaging, and the quantized version (Theorem 4.1).

**Full precision** (Zou, Wu, Braverman, Gu & Kakade, COLT 2021 / JMLR 2023, Theorem 5.1): for γ < 1/(α tr H),
with k* = #{i : λ_i ≥ 1/(Nγ)} and η_0 = w_0 − w*,

    Bias = ‖η_0‖²_{H⁻¹_{0:k*}}/(N²γ²) + ‖η_0‖²_{H_{k*:∞}},
    Var  = [2α(‖η_0‖²_{I_{0:k*}}/(Nγ) + ‖η_0‖²_{H_{k*:∞}}) + σ²]/(1 − γα tr H) · (k*/N + Nγ²Σ_{i>k*}λ_i²),

and E L(w̄_N) − L(w*) ≤ 2·Bias + 2·Var with L(w) = ½E(y − xᵀw)², i.e. E‖w̄_N − w*‖²_H ≤ 4·(Bias + Var).
(The paper's exp(−NγH) factor in the first bias term is dropped: the bound only grows.)

**Quantized** (the paper's Theorem 4.1 as our notes give it; constants reconstructed [R]): SGD on quantized
data is SGD on the problem (H^(q), w^(q)) with the other quantizers as extra noise, so

    E[(Q_d(x)ᵀw̄_N − y)²] − σ² = E‖w̄_N − w^(q)‖²_{H^(q)} + ApproxErr
                              ≤ ApproxErr + 4·(Bias + Var)[H^(q), w^(q), σ_G², α_B],
    σ_G² = (σ_ξ² + v_l + v_a + v_o)/B + α_B·τ_p,   α_B = α/B + 1 − 1/B,

where v_l, v_a, v_o are the label, activation and output-gradient quantization variances, τ_p =
sup E tr(H^(q)ε_pε_pᵀ) the parameter one (additive: ε tr H^(q); multiplicative: ε·sup‖w_t‖²_{H^(q)}), and
σ_ξ² = σ² + ApproxErr (exact for additive Gaussian data) or σ² + α·ApproxErr otherwise. Reconstructed:
the factor 4 (Zou's 2 in L-units), α_B for a batch (E[(XᵀX/B)A(XᵀX/B)] ≼ α_B tr(HA)H), the factor α on
multiplicative residual noise (E[v(x)xxᵀ] ≼ α E[v] H for v quadratic in x), and the sups, which we read off
the simulated trajectory. For the clean risk, H ≼ H^(q) for unbiased quantizers gives
E‖w̄ − w*‖²_H ≤ (√(4(Bias + Var)) + ‖w^(q) − w*‖_H)². The bound claims to hold only for unbiased quantizers
and γ < 1/(α_B tr H^(q)); elsewhere ``valid`` is False.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from litlab.methods.quantsgd.moments import DataMoments
from litlab.methods.quantsgd.simulator import TARGETS, Problem, Setting

# E‖w̄ − w*‖²_H = 2·(E L(w̄) − L(w*)) and Zou et al. bound the latter by 2·Bias + 2·Var.
RISK_FACTOR = 4.0


@dataclass(frozen=True)
class Bound:
    """Bound terms at each checkpoint N (tensors of shape ``(checkpoints,)``) and the scalars they use."""

    n_steps: torch.Tensor
    k_star: torch.Tensor
    bias: torch.Tensor
    variance: torch.Tensor
    approx: float
    noise: float
    alpha_b: float
    excess_q: torch.Tensor
    excess: torch.Tensor
    valid: bool
    reason: str


def zou_terms(
    spectrum: torch.Tensor,
    eta0: torch.Tensor,
    noise: float,
    step_size: float,
    n_steps: Sequence[int],
    alpha: float,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(k*, Bias, Var) of Zou et al.'s Theorem 5.1 at each N for spectrum λ, η_0 = w_0 − w*, σ² = noise."""
    n = torch.as_tensor(list(n_steps), dtype=spectrum.dtype)[:, None]  # (K, 1)
    head = spectrum[None] >= 1 / (n * step_size)  # (K, d): the top-k* eigendirections
    tail = ~head
    safe = torch.where(spectrum > 0, spectrum, 1.0)
    k_star = head.sum(-1)
    head_inv = (eta0**2 / safe * head).sum(-1)
    head_id = (eta0**2 * head).sum(-1)
    tail_h = (eta0**2 * spectrum * tail).sum(-1)
    n = n[:, 0]
    bias = head_inv / (n * step_size) ** 2 + tail_h
    contraction = 1 - step_size * alpha * spectrum.sum()
    dimension = k_star / n + n * step_size**2 * (spectrum**2 * tail).sum(-1)
    variance = (2 * alpha * (head_id / (n * step_size) + tail_h) + noise) / contraction * dimension
    return k_star, bias, variance


def _noise_terms(
    problem: Problem, setting: Setting, moments: DataMoments, alpha: float, sup_norm: float, sup_dev: float
) -> tuple[float, float, float]:
    """(σ_ξ² + v_l + v_a + v_o, τ_p, ApproxErr): the per-sample residual noise and the parameter noise."""
    spectrum, w_star = problem.spectrum(setting.dim), problem.w_star(setting.dim)
    approx = float(moments.approximation_error(spectrum, w_star))
    sigma2 = problem.noise_std**2
    data = setting.data
    base = sigma2 + approx * (1.0 if data.kind == "additive" or not data.active else alpha)

    def eps(target: str) -> tuple[float, bool]:
        q = setting.quantizer(target)
        return (q.eps if q.active else 0.0), q.multiplicative

    def need(value: float, target: str) -> float:
        if math.isnan(value):
            raise ValueError(
                f"the bound for a multiplicative {target} quantizer needs the simulated sup terms"
            )
        return value

    eps_l, mul_l = eps("label")
    v_l = eps_l * ((spectrum * w_star**2).sum().item() + sigma2) if mul_l else eps_l
    eps_p, mul_p = eps("param")
    tau_p = eps_p * (need(sup_norm, "param") if mul_p and eps_p else moments.second.sum().item())
    eps_a, mul_a = eps("act")
    v_a = eps_a * (need(sup_norm, "act") + tau_p) if mul_a and eps_a else eps_a
    eps_o, mul_o = eps("grad")
    residual2 = (need(sup_dev, "grad") if mul_o and eps_o else 0.0) + tau_p + sigma2 + approx + v_l + v_a
    v_o = eps_o * residual2 if mul_o else eps_o
    # Multiplicative residual noise is correlated with x: E[v(x)xxᵀ] ≼ α·E[v]·H costs a factor α.
    scaled = sum(alpha * v if mul else v for v, mul in ((v_l, mul_l), (v_a, mul_a), (v_o, mul_o)))
    return base + scaled, tau_p, approx


def quantized_bound(
    problem: Problem,
    setting: Setting,
    moments: DataMoments,
    n_steps: Sequence[int],
    sup_norm: float = math.nan,
    sup_dev: float = math.nan,
) -> Bound:
    """The reconstructed Theorem 4.1 bound for ``setting`` at each N in ``n_steps`` (w_0 = 0)."""
    spectrum, w_star = problem.spectrum(setting.dim), problem.w_star(setting.dim)
    second, w_q = moments.second, moments.optimum(w_star)
    alpha = max(3.0, moments.kurtosis)
    batch = setting.batch_size
    alpha_b = alpha / batch + 1 - 1 / batch
    residual, tau_p, approx = _noise_terms(problem, setting, moments, alpha, sup_norm, sup_dev)
    noise = residual / batch + alpha_b * tau_p
    k_star, bias, variance = zou_terms(second, -w_q, noise, setting.step_size, n_steps, alpha_b)
    sgd = RISK_FACTOR * (bias + variance)
    shift = math.sqrt(float((spectrum * (w_q - w_star) ** 2).sum()))
    biased = [t for t in TARGETS if setting.quantizer(t).active and not setting.quantizer(t).unbiased]
    limit = 1 / (alpha_b * second.sum().item())
    reason = ""
    if setting.step_size >= limit:
        # Outside γ < 1/(α_B tr H^(q)) the contraction factor is not positive: no bound at all.
        sgd = torch.full_like(sgd, math.inf)
    if biased:
        reason = f"biased (round-to-nearest) quantizers on {', '.join(biased)}"
    elif setting.step_size >= limit:
        reason = f"step size {setting.step_size:g} >= 1/(alpha_B tr H^(q)) = {limit:.3g}"
    return Bound(
        n_steps=torch.as_tensor(list(n_steps)),
        k_star=k_star,
        bias=bias,
        variance=variance,
        approx=approx,
        noise=noise,
        alpha_b=alpha_b,
        excess_q=approx + sgd,
        excess=(sgd.sqrt() + shift) ** 2,
        valid=not reason,
        reason=reason,
    )
