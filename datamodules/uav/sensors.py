"""Sensor models: an ESIM/v2e-style event pixel array and an RGB camera with exposure blur and low light."""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class Events:
    """An event stream sorted by time: pixel ``x, y (N,)`` (long), time ``t (N,)`` (s), ``p (N,)`` ±1."""

    x: torch.Tensor
    y: torch.Tensor
    t: torch.Tensor
    p: torch.Tensor

    def __len__(self) -> int:
        return len(self.t)

    def shifted(self, offset: float) -> Events:
        """The same events stamped ``offset`` seconds later (a clock offset)."""
        return Events(self.x, self.y, self.t + offset, self.p)

    def window(self, t0: float, t1: float) -> Events:
        """The events with ``t0 <= t < t1``."""
        lo, hi = torch.searchsorted(self.t, torch.tensor([t0, t1], dtype=self.t.dtype, device=self.t.device))
        return Events(self.x[lo:hi], self.y[lo:hi], self.t[lo:hi], self.p[lo:hi])

    def to(self, device: torch.device | str) -> Events:
        return Events(self.x.to(device), self.y.to(device), self.t.to(device), self.p.to(device))

    @staticmethod
    def concatenate(parts: list[Events]) -> Events:
        """Merge event streams and sort by time."""
        t = torch.cat([e.t for e in parts])
        order = torch.argsort(t, stable=True)
        return Events(*(torch.cat([getattr(e, k) for e in parts])[order] for k in ("x", "y", "t", "p")))


def simulate_events(
    log_frames: torch.Tensor,
    times: torch.Tensor,
    threshold_pos: torch.Tensor,
    threshold_neg: torch.Tensor,
    refractory: float = 0.0,
) -> Events:
    """Events of a pixel array watching log intensity ``log_frames (T, H, W)`` sampled at ``times (T,)``.

    A pixel fires each time its log intensity moves by its threshold (``threshold_pos/neg (H, W)``)
    from its reference level; crossing times are interpolated linearly between samples (ESIM). An event
    closer than ``refractory`` seconds to the pixel's previous emitted event is dropped, but the
    reference still moves past that level (the change is lost, as in v2e's refractory filter).
    """
    height, width = log_frames.shape[1:]
    flat = log_frames.reshape(len(times), -1)
    reference = flat[0].clone()
    last = torch.full(reference.shape, -float("inf"), dtype=times.dtype, device=times.device)
    c_pos, c_neg = threshold_pos.reshape(-1), threshold_neg.reshape(-1)
    xs, ys, ts, ps = [], [], [], []
    for i in range(1, len(times)):
        prev, now = flat[i - 1], flat[i]
        change = now - reference
        threshold = torch.where(change > 0, c_pos, c_neg)
        count = torch.floor(change.abs() / threshold).long()
        firing = count.nonzero().squeeze(1)
        if len(firing) == 0:
            continue
        n = count[firing]
        sign = torch.sign(change[firing])
        pixel = torch.repeat_interleave(firing, n)
        start = torch.cumsum(n, 0) - n
        k = torch.arange(len(pixel), device=flat.device) - torch.repeat_interleave(start, n) + 1
        level = reference[pixel] + torch.repeat_interleave(sign * threshold[firing], n) * k
        step = (now - prev)[pixel]
        fraction = torch.where(step.abs() > 0, (level - prev[pixel]) / step, torch.ones_like(step))
        t = times[i - 1] + fraction.clamp(0, 1).to(times.dtype) * (times[i] - times[i - 1])
        keep = _refractory_keep(pixel, t, last, refractory)
        reference[firing] += sign * threshold[firing] * n
        if keep.any():
            kept_pixel, kept_t = pixel[keep], t[keep]
            last.scatter_reduce_(0, kept_pixel, kept_t, reduce="amax")
            xs.append(kept_pixel % width)
            ys.append(kept_pixel // width)
            ts.append(kept_t)
            ps.append(torch.repeat_interleave(sign, n)[keep].long())
    if not ts:
        empty = torch.zeros(0, dtype=torch.long)
        return Events(empty, empty, torch.zeros(0, dtype=times.dtype), empty)
    return Events.concatenate([Events(x, y, t, p) for x, y, t, p in zip(xs, ys, ts, ps, strict=True)])


def _refractory_keep(
    pixel: torch.Tensor, t: torch.Tensor, last: torch.Tensor, refractory: float
) -> torch.Tensor:
    """Which of one step's crossings ``(pixel, t)`` (time-ordered within each pixel) survive the filter.

    Within a step a pixel's crossings are evenly spaced, so the sequential rule "keep if at least
    ``refractory`` after the last kept event" keeps every m-th eligible crossing,
    m = ceil(refractory / spacing).
    """
    if refractory <= 0:
        return torch.ones_like(pixel, dtype=torch.bool)
    eligible = t >= last[pixel] + refractory
    index = torch.arange(len(pixel), device=pixel.device)
    big = torch.full((len(last),), len(pixel), dtype=torch.long, device=pixel.device)
    first = big.scatter_reduce(0, pixel[eligible], index[eligible], reduce="amin")[pixel]
    t_first = t[first.clamp(max=len(t) - 1)]
    t_next = t[(first + 1).clamp(max=len(t) - 1)]
    same = pixel[(first + 1).clamp(max=len(t) - 1)] == pixel
    spacing = torch.where(same, t_next - t_first, torch.full_like(t, float("inf")))
    m = torch.ceil(refractory / spacing.clamp_min(1e-12) - 1e-9).clamp(min=1).long()
    return eligible & ((index - first) % m == 0)


def noise_events(
    rate_hz: float, height: int, width: int, t0: float, t1: float, generator: torch.Generator
) -> Events:
    """Background-activity noise: a Poisson process of ``rate_hz`` per pixel with random polarity."""
    n = int(torch.poisson(torch.tensor(rate_hz * height * width * (t1 - t0)), generator=generator))
    t, _ = torch.sort(t0 + (t1 - t0) * torch.rand(n, generator=generator, dtype=torch.float64))
    x = torch.randint(0, width, (n,), generator=generator)
    y = torch.randint(0, height, (n,), generator=generator)
    p = torch.randint(0, 2, (n,), generator=generator) * 2 - 1
    return Events(x, y, t, p)


def expose_rgb(
    sharp: torch.Tensor,
    gain: float = 1.0,
    full_well: float = 400.0,
    read_noise: float = 2.0,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """An 8-bit RGB frame ``(3, H, W)`` in [0, 1] from an exposure's sharp sub-renders ``sharp (S, 3, H, W)``.

    The mean over sub-renders is the motion blur; ``gain < 1`` is low light: ``gain·full_well`` expected
    electrons at white, Poisson shot noise, Gaussian read noise (electrons), then a digital gain of
    ``1/gain`` (auto exposure) and 8-bit quantisation, so low light comes back as bright but noisy.
    """
    image = sharp.mean(dim=0)
    if gain < 1.0 or read_noise > 0:
        electrons = torch.poisson(image.clamp_min(0) * gain * full_well, generator=generator)
        electrons = electrons + read_noise * torch.randn(image.shape, generator=generator)
        image = electrons / (gain * full_well)
    return torch.round(image.clamp(0, 1) * 255) / 255
