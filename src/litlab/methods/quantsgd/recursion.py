"""The exact expected risk of quantized SGD with averaging, by a second-moment recursion (diagonal H).

For Gaussian x ~ N(0, diag(λ)) the diagonal m_t = E[(w_t − w')²] and the mean μ_t = E[w_t − w'] evolve in
closed form (Gaussian fourth moments, E[x_i²(xᵀv)²] = λ_iΣ_kλ_kv_k² + 2λ_i²v_i² for v independent of x):

    μ_{t+1} = (1 − γλ)μ_t,
    m_{t+1} = (1 − 2γλ)m_t + γ²[(1 + 1/B)λ²U + (1/B)λ(λ·U)] + (γ²/B)·N_t,

with U = m + Σ_p (Σ_p the parameter-noise variance) and N_t = E[x_i²·Var(per-sample residual noise | x)]
collecting label noise σ² and the label, activation and output-gradient quantizers. The averaged
iterate's moments follow from E[η_tη_s] = (1 − γλ)^{t−s}m_s (t > s). Idealised quantizers only
(additive / multiplicative Gaussian on label, param, act, grad); additive Gaussian data quantization
reduces exactly to a clean problem with λ' = λ + ε, w' = λw*/λ', σ'² = σ² + ApproxErr (x̃ is Gaussian
and y − x̃ᵀw' is independent of x̃). The simulator's mean risk must match this within Monte-Carlo error.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from litlab.methods.quantsgd.simulator import Problem, Setting

SUPPORTED = ("none", "additive", "multiplicative")


def _fourth(lam: torch.Tensor, v2: torch.Tensor) -> torch.Tensor:
    """E[x_i²(xᵀv)²] for x ~ N(0, diag(lam)) and v independent of x with E[v_k²] = v2_k."""
    return lam * (lam * v2).sum() + 2 * lam**2 * v2


def _eps(setting: Setting, target: str) -> tuple[str, float]:
    quantizer = setting.quantizer(target)
    kind = quantizer.kind if quantizer.active else "none"
    allowed = ("none", "additive") if target == "data" else SUPPORTED
    if kind not in allowed:
        raise ValueError(f"the exact recursion supports {target} quantizers {allowed}, got {kind!r}")
    return kind, quantizer.eps if quantizer.active else 0.0


def expected_risk(
    problem: Problem, setting: Setting, checkpoints: Sequence[int], dtype: torch.dtype = torch.float64
) -> dict[str, torch.Tensor]:
    """Exact E‖w̄_N − w*‖²_H (``risk``) and E[(Q_d(x)ᵀw̄_N − y)²] − σ² (``risk_q``) at each checkpoint N."""
    checkpoints = sorted({int(n) for n in checkpoints})
    kinds = {t: _eps(setting, t) for t in ("data", "label", "param", "act", "grad")}
    lam0, w_star = problem.spectrum(setting.dim, dtype), problem.w_star(setting.dim, dtype)
    eps_d = kinds["data"][1]
    lam = lam0 + eps_d
    w_opt = lam0 * w_star / lam
    approx = (lam0 * eps_d / lam * w_star**2).sum()
    noise2 = problem.noise_std**2 + approx
    gamma, batch = setting.step_size, setting.batch_size
    rho = 1 - gamma * lam
    mean = -w_opt.clone()
    m = w_opt**2
    history = torch.empty(checkpoints[-1], setting.dim, dtype=dtype)
    for t in range(checkpoints[-1]):
        history[t] = m
        w2 = m + 2 * w_opt * mean + w_opt**2  # E[w_t²]
        kind_p, eps_p = kinds["param"]
        sigma_p = eps_p * w2 if kind_p == "multiplicative" else torch.full_like(m, eps_p)
        u2, p2 = m + sigma_p, w2 + sigma_p
        label = _residual_term(kinds["label"], lam, _fourth(lam, w_opt**2) + noise2 * lam)
        act = _residual_term(kinds["act"], lam, _fourth(lam, p2))
        signal = _fourth(lam, u2) + noise2 * lam + label + act  # E[x_i² r²] before output quantization
        grad = _residual_term(kinds["grad"], lam, signal)
        noise = noise2 * lam + label + act + grad
        m = (
            (1 - 2 * gamma * lam) * m
            + gamma**2 * ((1 + 1 / batch) * lam**2 * u2 + lam * (lam * u2).sum() / batch)
            + gamma**2 / batch * noise
        )
        mean = rho * mean
    risk, risk_q = [], []
    for n in checkpoints:
        lags = torch.arange(n - 1, -1, -1, dtype=dtype)[:, None]  # N − 1 − s for s = 0..N−1
        weight = 1 + 2 * rho * (1 - rho**lags) / (1 - rho)
        second = (history[:n] * weight).sum(0) / n**2  # E[η̄²]
        first = -w_opt * (1 - rho**n) / (n * (1 - rho))  # E[η̄]
        shift = w_opt - w_star
        risk.append((lam0 * (second + 2 * first * shift + shift**2)).sum())
        risk_q.append((lam * second).sum() + approx)
    return {"risk": torch.stack(risk), "risk_q": torch.stack(risk_q)}


def _residual_term(spec: tuple[str, float], lam: torch.Tensor, multiplied: torch.Tensor) -> torch.Tensor:
    """E[x_i²·e²] for one residual quantizer: ε·λ_i if additive, ε·E[x_i²·(its input)²] if multiplicative."""
    kind, eps = spec
    if kind == "additive":
        return eps * lam
    if kind == "multiplicative":
        return eps * multiplied
    return torch.zeros_like(lam)
