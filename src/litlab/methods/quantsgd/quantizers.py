"""The quantizers Q of quantized SGD, as plain tensor functions with their randomness passed in.

Each kind is parameterised by ε, the paper's bound on the conditional error covariance:

- ``additive``        Q(x) = x + √ε·g,          g ~ N(0, 1): unbiased, Cov = εI (the idealised INT model);
- ``multiplicative``  Q(x) = x·(1 + √ε·g):      unbiased, Cov = ε·diag(x²) (the idealised FP model);
- ``int``             stochastic rounding on the grid δℤ with δ = 2√ε: unbiased, Var = δ²f(1−f) ≤ ε
                      (f the fractional part of x/δ), an INT format without clipping;
- ``fp``              stochastic rounding to m mantissa bits (spacing 2^(e−m) on [2^e, 2^(e+1))), with m
                      the smallest integer such that 4^-m/4 ≤ ε: unbiased, Var ≤ ε·x² (FP without range
                      limits; ``fp_eps(m)`` gives the ε of m bits exactly);
- ``fp16``, ``bf16``, ``fp8_e4m3``, ``fp8_e5m2``  real round-to-nearest casts (deterministic, so biased;
                      relative error ≤ 2^-(m+1), ε = 4^-(m+1) is their nominal value; e4m3 saturates at ±448
                      and both fp8 formats have subnormals: tiny inputs get an absolute, not relative, error).

ε = 0 is the identity for every kind (a cast is switched off by ε = 0), so a batch of settings can mix
quantized and full-precision rows exactly. Noise tensors broadcast against ``x``; ``eps`` broadcasts too.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

STOCHASTIC = ("additive", "multiplicative", "int", "fp")
CASTS = {
    "fp16": (torch.float16, 10),
    "bf16": (torch.bfloat16, 7),
    "fp8_e4m3": (torch.float8_e4m3fn, 3),
    "fp8_e5m2": (torch.float8_e5m2, 2),
}
KINDS = ("none", *STOCHASTIC, *CASTS)
# Which standard noise a kind consumes: Gaussian for the idealised models, uniform for stochastic rounding.
NOISE = {"additive": "normal", "multiplicative": "normal", "int": "uniform", "fp": "uniform"}
ADDITIVE_KINDS = ("additive", "int")
MULTIPLICATIVE_KINDS = ("multiplicative", "fp", *CASTS)


@dataclass(frozen=True)
class Quantizer:
    """One target's quantizer: a kind of ``KINDS`` and its ε (0 switches it off)."""

    kind: str = "none"
    eps: float = 0.0

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown quantizer kind {self.kind!r}; choose one of {', '.join(KINDS)}")
        if not (self.eps >= 0 and math.isfinite(self.eps)):
            raise ValueError(f"quantizer eps must be a finite number >= 0, got {self.eps}")
        if self.kind in CASTS and self.eps == 0:
            object.__setattr__(self, "eps", cast_eps(self.kind))
        if self.kind == "none" and self.eps != 0:
            raise ValueError(f"kind 'none' takes eps=0, got {self.eps}")

    @property
    def active(self) -> bool:
        return self.kind != "none" and self.eps > 0

    @property
    def unbiased(self) -> bool:
        """E[Q(x) | x] = x (what the paper's analysis assumes)."""
        return self.kind not in CASTS

    @property
    def multiplicative(self) -> bool:
        """Its error scales with |x| (FP-like) rather than being constant (INT-like)."""
        return self.kind in MULTIPLICATIVE_KINDS

    @property
    def label(self) -> str:
        return "none" if not self.active else f"{self.kind}({self.eps:.3g})"


NONE = Quantizer()


def fp_eps(mantissa_bits: int) -> float:
    """ε of stochastic rounding to ``mantissa_bits`` bits: the relative variance bound 4^-m / 4."""
    return 0.25 * 4.0**-mantissa_bits


def int_eps(bits: int, value_range: float) -> float:
    """ε of stochastic rounding on a ``bits``-bit grid over [−value_range, value_range]: δ²/4."""
    step = 2 * value_range / (2**bits - 1)
    return step**2 / 4


def cast_eps(kind: str) -> float:
    """Nominal ε of a round-to-nearest cast: the squared relative error bound 4^-(m+1)."""
    return 4.0 ** -(CASTS[kind][1] + 1)


def mantissa_bits(eps: torch.Tensor) -> torch.Tensor:
    """Smallest m with 4^-m/4 ≤ ε (inf where ε = 0), so that ``fp`` honours the bound ε."""
    safe = eps.clamp_min(torch.finfo(eps.dtype).tiny)
    bits = torch.ceil(-torch.log2(2 * safe.sqrt()) - 1e-9).clamp_min(0)
    return torch.where(eps > 0, bits, torch.full_like(bits, math.inf))


def grid_step(x: torch.Tensor, kind: str, eps: torch.Tensor) -> torch.Tensor:
    """The local grid spacing of stochastic rounding (``int``: 2√ε; ``fp``: 2^(e−m), |x| ∈ [2^e, 2^(e+1)))."""
    if kind == "int":
        return (2 * eps.sqrt()).expand_as(x)
    exponent = torch.frexp(x).exponent.to(x.dtype)  # |x| = mantissa·2^exponent, mantissa ∈ [0.5, 1)
    return torch.exp2(exponent - 1 - mantissa_bits(eps))


def quantize(
    x: torch.Tensor, kind: str, eps: torch.Tensor | float, noise: torch.Tensor | None
) -> torch.Tensor:
    """Q(x) for one kind; ``noise`` is N(0, 1) for additive/multiplicative, U[0, 1) for int/fp, else None."""
    if kind == "none":
        return x
    # At least 1-d, so that float32 noise promotes to x's dtype (a 0-d tensor would not promote it).
    eps = torch.as_tensor(eps, dtype=x.dtype, device=x.device)
    eps = eps.reshape(1) if eps.ndim == 0 else eps
    if kind in CASTS:
        return torch.where(eps > 0, x.to(CASTS[kind][0]).to(x.dtype), x)
    if noise is None:
        raise ValueError(f"quantizer kind {kind!r} needs a noise tensor ({NOISE[kind]})")
    if kind == "additive":
        return x + eps.sqrt() * noise
    if kind == "multiplicative":
        return x * (1 + eps.sqrt() * noise)
    if kind not in ("int", "fp"):
        raise ValueError(f"unknown quantizer kind {kind!r}; choose one of {', '.join(KINDS)}")
    step = grid_step(x, kind, eps)
    on = eps > 0
    safe = torch.where(on, step, torch.ones_like(step))
    return torch.where(on, safe * torch.floor(x / safe + noise), x)


def draw_noise(kind: str, out: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """Fill the float32 tensor ``out`` with the standard noise ``kind`` consumes (N(0, 1) or U[0, 1)).

    float32 draws are about 5x faster than float64 on CPU and keep 24-bit resolution; arithmetic on them
    promotes to the simulation's dtype, so nothing downstream runs in float32 unless asked.
    """
    draw = torch.randn if NOISE[kind] == "normal" else torch.rand
    return draw(out.shape, generator=generator, out=out)


def conditional_moments(
    x: torch.Tensor, kind: str, eps: torch.Tensor | float
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """E[Q(x)|x], E[Q(x)²|x], E[Q(x)⁴|x] exactly (closed forms; two-point law for stochastic rounding)."""
    eps = torch.as_tensor(eps, dtype=x.dtype, device=x.device)
    if kind == "none":
        return x, x**2, x**4
    if kind in CASTS:
        q = quantize(x, kind, eps, None)
        return q, q**2, q**4
    if kind == "additive":
        return x, x**2 + eps, x**4 + 6 * x**2 * eps + 3 * eps**2
    if kind == "multiplicative":
        return x, x**2 * (1 + eps), x**4 * (1 + 6 * eps + 3 * eps**2)
    on = eps > 0
    step = torch.where(on, grid_step(x, kind, eps), torch.ones_like(x))
    low = step * torch.floor(x / step)
    up = (x - low) / step  # probability of rounding up
    high = low + step
    second = torch.where(on, (1 - up) * low**2 + up * high**2, x**2)
    fourth = torch.where(on, (1 - up) * low**4 + up * high**4, x**4)
    return x, second, fourth
