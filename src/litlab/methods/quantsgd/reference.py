"""A naive numpy implementation of quantized SGD: one setting, one seed, one step at a time.

This is the obvious way to write the paper's algorithm, and our two uses of it: the oracle the batched
simulator must equal on the same random draws (tests), and the peer its speed is measured against
(``benchmarks/quantsgd_simulator_speed.py``). Randomness comes from ``draw(stream, noise, shape)`` with
stream one of ``simulator.STREAMS`` and noise ``"normal"`` or ``"uniform"``, so both can feed it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from litlab.methods.quantsgd.quantizers import NOISE
from litlab.methods.quantsgd.simulator import TARGETS, Problem, Setting

Draw = Callable[[str, str, tuple[int, ...]], np.ndarray]


def quantize_np(x: np.ndarray, kind: str, eps: float, noise: np.ndarray | None) -> np.ndarray:
    """The stochastic quantizers of ``quantizers.quantize`` in numpy (casts are torch-only)."""
    if kind == "none" or eps == 0:
        return x
    if kind == "additive":
        return x + math.sqrt(eps) * noise
    if kind == "multiplicative":
        return x * (1 + math.sqrt(eps) * noise)
    if kind == "int":
        step = 2 * math.sqrt(eps)
    elif kind == "fp":
        bits = max(0.0, math.ceil(-math.log2(2 * math.sqrt(eps)) - 1e-9))
        step = np.exp2(np.frexp(x)[1] - 1 - bits)
    else:
        raise ValueError(f"the numpy reference has no quantizer {kind!r} (casts are torch-only)")
    return step * np.floor(x / step + noise)


def reference_sgd(
    problem: Problem, setting: Setting, checkpoints: Sequence[int], draw: Draw
) -> dict[int, np.ndarray]:
    """The averaged iterate w̄_N (float64) at each checkpoint N, by a plain loop over steps."""
    dim, batch, gamma = setting.dim, setting.batch_size, setting.step_size
    sqrt_lam = np.sqrt(problem.spectrum(dim).numpy())
    w_star = problem.w_star(dim).numpy()
    quantizers = {t: setting.quantizer(t) for t in TARGETS}

    def q(target: str, x: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
        quantizer = quantizers[target]
        if not quantizer.active:
            return x
        noise = draw(target, NOISE[quantizer.kind], shape) if quantizer.kind in NOISE else None
        return quantize_np(x, quantizer.kind, quantizer.eps, noise)

    w, w_sum, out = np.zeros(dim), np.zeros(dim), {}
    wanted = set(checkpoints)
    for t in range(max(checkpoints)):
        x = draw("z", "normal", (batch, dim)) * sqrt_lam
        y = (x * w_star).sum(-1) + problem.noise_std * draw("xi", "normal", (batch,))
        x_q = q("data", x, (batch, dim))
        y_q = q("label", y, (batch,))
        p = q("param", w, (dim,))
        a_q = q("act", (x_q * p).sum(-1), (batch,))
        r_q = q("grad", y_q - a_q, (batch,))
        w_sum = w_sum + w
        w = w + gamma / batch * (r_q @ x_q)
        if t + 1 in wanted:
            out[t + 1] = w_sum / (t + 1)
    return out


def numpy_draw(rng: np.random.Generator) -> Draw:
    """A ``draw`` from one numpy generator (the benchmark's peer draws its own noise, step by step)."""

    def draw(stream: str, noise: str, shape: tuple[int, ...]) -> np.ndarray:
        return rng.standard_normal(shape) if noise == "normal" else rng.random(shape)

    return draw
