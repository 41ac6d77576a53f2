"""Quantized one-pass SGD with iterate averaging, batched over settings × seeds (the paper's algorithm).

With a fresh batch (X_t, y_t) of size B, every step is

    w_t = w_{t−1} + (γ/B)·Q_d(X_t)ᵀ·Q_o( Q_l(y_t) − Q_a(Q_d(X_t)·Q_p(w_{t−1})) ),   w_0 = 0,

and the output after N steps is w̄_N = (1/N)·Σ_{t<N} w_t. The loop over SGD steps IS the algorithm, so
this is a hand-written loop; each step is a few tensor ops on ``(settings, seeds, B, d)``, never a loop
over settings, seeds or samples. Every averaged iterate w̄_N along one run is the output of an N-step
run, so one trajectory gives the whole risk curve at ``checkpoints``.

Data: x ~ N(0, diag(i^-a)), y = ⟨w*, x⟩ + σξ (``Problem``). Settings may differ in d (padded with zero
variance), step size and every ε; those sharing B and quantizer kinds run as one batch. Randomness
is common across the settings of a batch (the same x, ξ and standard quantizer noise, scaled by each
setting's ε), so differences between settings are paired; each (seed, stream) has its
own generator, so a seed's stream does not depend on the other seeds run beside it.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from litlab.datamodules.linear_regression import power_law_spectrum
from litlab.methods.quantsgd.moments import DataMoments, data_moments
from litlab.methods.quantsgd.quantizers import NOISE, NONE, Quantizer, draw_noise, quantize

TARGETS = ("data", "label", "param", "act", "grad")
# Noise streams per step and seed: data features z, label noise ξ, then one per quantized target.
STREAMS = ("z", "xi", *TARGETS)


@dataclass(frozen=True)
class Problem:
    """The regression problem: λ_i = i^-exponent, y = ⟨w*, x⟩ + noise_std·ξ, w* = w_star_value·1."""

    exponent: float = 2.0
    noise_std: float = 1.0
    w_star_value: float = 1.0

    def spectrum(self, dim: int, dtype: torch.dtype = torch.float64) -> torch.Tensor:
        return power_law_spectrum(dim, self.exponent, dtype)

    def w_star(self, dim: int, dtype: torch.dtype = torch.float64) -> torch.Tensor:
        return torch.full((dim,), float(self.w_star_value), dtype=dtype)


@dataclass(frozen=True)
class Setting:
    """One configuration of quantized SGD: dimension, batch size B, step size γ and five quantizers."""

    dim: int = 200
    batch_size: int = 1
    step_size: float = 0.05
    data: Quantizer = NONE
    label: Quantizer = NONE
    param: Quantizer = NONE
    act: Quantizer = NONE
    grad: Quantizer = NONE

    def __post_init__(self) -> None:
        if self.dim < 1 or self.batch_size < 1:
            raise ValueError(f"dim and batch_size must be positive, got {self.dim} and {self.batch_size}")
        if not self.step_size > 0:
            raise ValueError(f"step_size must be positive, got {self.step_size}")

    def quantizer(self, target: str) -> Quantizer:
        return getattr(self, target)

    @property
    def kinds(self) -> dict[str, str]:
        """Each target's quantizer kind, ``none`` where it is off."""
        return {t: self.quantizer(t).kind if self.quantizer(t).active else "none" for t in TARGETS}

    @property
    def name(self) -> str:
        parts = [f"{t}={self.quantizer(t).label}" for t in TARGETS if self.quantizer(t).active]
        return ", ".join(parts) or "full precision"


@dataclass
class SimResult:
    """Risks of the averaged iterate at each checkpoint N, per setting and seed.

    ``risk``: clean excess risk ‖w̄_N − w*‖²_H; ``risk_q``: excess risk on quantized test inputs,
    E[(Q_d(x)ᵀw̄_N − y)²] − σ²; both ``(settings, seeds, checkpoints)``. ``sup_norm_q`` and ``sup_dev_q``
    ``(settings,)``: max over steps of the seed-mean of ‖w_t‖²_{H^(q)} and ‖w_t − w^(q)‖²_{H^(q)} (the
    trajectory quantities the bound's multiplicative-noise terms take a sup of; NaN where not needed).
    """

    settings: list[Setting]
    seeds: list[int]
    checkpoints: list[int]
    risk: torch.Tensor
    risk_q: torch.Tensor
    sup_norm_q: torch.Tensor
    sup_dev_q: torch.Tensor
    seconds: float = 0.0
    moments: list[DataMoments] = field(default_factory=list)


def group_settings(settings: Sequence[Setting]) -> list[tuple[dict[str, str], list[int]]]:
    """Indices of settings that can share one batch: equal B and, per target, one kind (or none)."""
    groups: list[tuple[dict[str, str], int, list[int]]] = []
    for index, setting in enumerate(settings):
        kinds = setting.kinds
        for group_kinds, batch, members in groups:
            fits = batch == setting.batch_size and all(
                "none" in (group_kinds[t], kinds[t]) or group_kinds[t] == kinds[t] for t in TARGETS
            )
            if fits:
                group_kinds.update({t: k for t, k in kinds.items() if k != "none"})
                members.append(index)
                break
        else:
            groups.append((kinds, setting.batch_size, [index]))
    return [(kinds, members) for kinds, _, members in groups]


class NoiseStream:
    """Standard noise for a batch of seeds, drawn in chunks of steps from one generator per (seed, stream).

    ``next_chunk()`` returns, per stream, a float32 ``(seeds, T, ...)``: z ``(B, D)``, ξ ``(B,)``, data noise
    ``(B, D)``, label/act/grad noise ``(B,)``, param noise ``(D,)``; targets with kind none get None.
    """

    def __init__(
        self,
        seeds: Sequence[int],
        batch_size: int,
        dim: int,
        kinds: dict[str, str],
        device: torch.device | str = "cpu",
        chunk_elements: int = 2**14,
    ) -> None:
        if any(seed < 0 for seed in seeds):
            raise ValueError(f"seeds must be non-negative integers, got {list(seeds)}")
        self.seeds, self.batch_size, self.dim, self.kinds = list(seeds), batch_size, dim, kinds
        self.device = torch.device(device)
        self.steps_per_chunk = max(1, chunk_elements // (batch_size * dim))
        self.shapes = {
            "z": (batch_size, dim),
            "xi": (batch_size,),
            "data": (batch_size, dim),
            "label": (batch_size,),
            "param": (dim,),
            "act": (batch_size,),
            "grad": (batch_size,),
        }

        # One generator per (seed, stream), seeded through SeedSequence: the CPU generator keeps only
        # 32 bits of a seed, so arithmetic mixes such as seed·2^32 + stream would collide.
        self.generators = {
            (seed, stream): torch.Generator(device=self.device).manual_seed(
                int(np.random.SeedSequence([seed, stream]).generate_state(1)[0])
            )
            for seed in self.seeds
            for stream in range(len(STREAMS))
        }

    def next_chunk(self) -> dict[str, torch.Tensor | None]:
        """The next ``steps_per_chunk`` steps of each stream, float32 ``(seeds, T, ...)`` (None if unused)."""
        out: dict[str, torch.Tensor | None] = {}
        for stream, name in enumerate(STREAMS):
            kind = "additive" if name in ("z", "xi") else self.kinds[name]
            if kind not in NOISE:
                out[name] = None
                continue
            buffer = torch.empty(
                len(self.seeds), self.steps_per_chunk, *self.shapes[name], device=self.device
            )
            for row, seed in enumerate(self.seeds):
                draw_noise(kind, buffer[row], self.generators[seed, stream])
            out[name] = buffer
        return out


def simulate(
    problem: Problem,
    settings: Sequence[Setting],
    seeds: Sequence[int],
    checkpoints: Sequence[int],
    dtype: torch.dtype = torch.float64,
    device: torch.device | str = "cpu",
    chunk_elements: int = 2**14,
    seed_block: int = 256,
) -> SimResult:
    """Run every setting for max(checkpoints) steps on every seed; risks of w̄_N at each checkpoint N.

    Noise is drawn ``chunk_elements`` per seed and stream at a time, for at most ``seed_block`` seeds at
    once (memory: about 16·seed_block·chunk_elements bytes); neither changes any result.
    """
    checkpoints = sorted({int(n) for n in checkpoints})
    if not settings or not seeds or not checkpoints or checkpoints[0] < 1:
        raise ValueError("simulate needs settings, seeds and positive checkpoints")
    start = time.perf_counter()
    n_s, n_r, n_k = len(settings), len(seeds), len(checkpoints)
    risk = torch.empty(n_s, n_r, n_k, dtype=dtype)
    risk_q = torch.empty_like(risk)
    sup_norm = torch.full((n_s,), float("nan"), dtype=dtype)
    sup_dev = torch.full_like(sup_norm, float("nan"))
    moments = [data_moments(s.data, problem.spectrum(s.dim, dtype)) for s in settings]
    for kinds, members in group_settings(settings):
        index = torch.tensor(members)
        norm_sum = dev_sum = None
        for first in range(0, n_r, seed_block):
            block = list(seeds)[first : first + seed_block]
            part_risk, part_risk_q, norms, devs = _simulate_group(
                problem,
                [settings[i] for i in members],
                [moments[i] for i in members],
                kinds,
                block,
                checkpoints,
                dtype,
                torch.device(device),
                chunk_elements,
            )
            risk[index, first : first + len(block)] = part_risk.cpu()
            risk_q[index, first : first + len(block)] = part_risk_q.cpu()
            if norms is not None:
                norm_sum = norms.cpu() if norm_sum is None else norm_sum + norms.cpu()
                dev_sum = devs.cpu() if dev_sum is None else dev_sum + devs.cpu()
        if norm_sum is not None:
            sup_norm[index] = (norm_sum / n_r).max(-1).values
            sup_dev[index] = (dev_sum / n_r).max(-1).values
    return SimResult(
        list(settings),
        list(seeds),
        checkpoints,
        risk,
        risk_q,
        sup_norm,
        sup_dev,
        time.perf_counter() - start,
        moments,
    )


def _padded(rows: list[torch.Tensor], width: int) -> torch.Tensor:
    """Stack 1-D tensors, zero-padded to ``width``."""
    return torch.stack([torch.nn.functional.pad(r, (0, width - len(r))) for r in rows])


def _simulate_group(
    problem: Problem,
    settings: list[Setting],
    moments: list[DataMoments],
    kinds: dict[str, str],
    seeds: list[int],
    checkpoints: list[int],
    dtype: torch.dtype,
    device: torch.device,
    chunk_elements: int,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
    """One batch of settings with equal B and kinds: the vectorised SGD loop.

    Returns risk, risk_q ``(S, R, K)`` and, when a multiplicative param/act/grad quantizer needs them, the
    per-step seed sums of ‖w_t‖²_{H^(q)} and ‖w_t − w^(q)‖²_{H^(q)} ``(S, N)`` (else None).
    """
    n_steps, batch = checkpoints[-1], settings[0].batch_size
    dim = max(s.dim for s in settings)
    lam = _padded([problem.spectrum(s.dim, dtype) for s in settings], dim).to(device)  # (S, D)
    w_star = _padded([problem.w_star(s.dim, dtype) for s in settings], dim).to(device)
    second = _padded([m.second for m in moments], dim).to(device)
    cross = _padded([m.cross for m in moments], dim).to(device)
    w_q = _padded([m.optimum(problem.w_star(s.dim, dtype)) for s, m in zip(settings, moments)], dim).to(
        device
    )
    mask = (lam > 0).to(dtype)[:, None, None, :]
    # Padded coordinates have x = 0, but additive quantizers would give them noise: masked out.
    pad = kinds["data"] in ("additive", "int") and bool((lam == 0).any())
    sqrt_lam = lam.sqrt()[:, None, None, :]  # (S, 1, 1, D)
    w_star_row = w_star[:, None, None, :]  # (S, 1, 1, D)
    step = torch.tensor([s.step_size / batch for s in settings], dtype=dtype, device=device)[:, None, None]
    eps = {
        t: torch.tensor([s.quantizer(t).eps if kinds[t] != "none" else 0.0 for s in settings], dtype=dtype)
        .to(device)
        .view(-1, *[1] * (3 if t == "data" else 2))
        for t in TARGETS
    }
    track_sup = any(kinds[t] in ("multiplicative", "fp") for t in ("param", "act", "grad"))
    stream = NoiseStream(seeds, batch, dim, kinds, device, chunk_elements)
    n_s, n_r = len(settings), len(seeds)
    w = torch.zeros(n_s, n_r, dim, dtype=dtype, device=device)
    w_sum = torch.zeros_like(w)
    # Per-step seed sums of ‖w_t‖²_{H^(q)} and ‖w_t − w^(q)‖²_{H^(q)} (the bound takes the sup of the means).
    norm_sum = torch.zeros(n_s, n_steps, dtype=dtype, device=device) if track_sup else None
    dev_sum = torch.zeros_like(norm_sum) if track_sup else None
    risk = torch.empty(n_s, n_r, len(checkpoints), dtype=dtype, device=device)
    risk_q = torch.empty_like(risk)
    wanted = {n: k for k, n in enumerate(checkpoints)}
    sigma = torch.tensor([problem.noise_std], dtype=dtype, device=device)  # 1-d: float32 noise promotes
    noise: dict[str, torch.Tensor | None] = {}
    for t in range(n_steps):
        offset = t % stream.steps_per_chunk
        if offset == 0:
            noise = stream.next_chunk()
        now = {name: None if v is None else v[:, offset] for name, v in noise.items()}
        x = now["z"] * sqrt_lam  # (S, R, B, D)
        y = (x * w_star_row).sum(-1) + sigma * now["xi"]  # (S, R, B)
        x_q = quantize(x, kinds["data"], eps["data"], now["data"])
        if pad:
            x_q = x_q * mask
        y_q = quantize(y, kinds["label"], eps["label"], now["label"])
        p = quantize(w, kinds["param"], eps["param"], now["param"])
        a = (x_q * p.unsqueeze(-2)).sum(-1)
        a_q = quantize(a, kinds["act"], eps["act"], now["act"])
        r_q = quantize(y_q - a_q, kinds["grad"], eps["grad"], now["grad"])
        if track_sup:
            norm_sum[:, t] = (second[:, None] * w**2).sum((-1, -2))
            dev_sum[:, t] = (second[:, None] * (w - w_q[:, None]) ** 2).sum((-1, -2))
        w_sum += w
        # Σ_b r_b·x_b: an outer product when B = 1 (batched matmul of 1×1 blocks is slow), else a matmul.
        if batch == 1:
            w = w + step * r_q * x_q.squeeze(-2)
        else:
            w = w + step * (r_q.unsqueeze(-2) @ x_q).squeeze(-2)
        if t + 1 in wanted:
            w_bar = w_sum / (t + 1)
            k = wanted[t + 1]
            risk[:, :, k] = (lam[:, None] * (w_bar - w_star[:, None]) ** 2).sum(-1)
            energy = (lam * w_star**2).sum(-1, keepdim=True)
            risk_q[:, :, k] = (second[:, None] * w_bar**2 - 2 * (cross * w_star)[:, None] * w_bar).sum(
                -1
            ) + energy
    return risk, risk_q, norm_sum, dev_sum
