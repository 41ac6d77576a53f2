"""The event pixel model against analytic brightness ramps, and the RGB camera's noise model."""

from __future__ import annotations

import torch

from litlab.datamodules.uav.sensors import Events, expose_rgb, noise_events, simulate_events


def ramp(rate: float, duration: float = 1.0, steps: int = 2001) -> tuple[torch.Tensor, torch.Tensor]:
    """Log intensity ``rate·t`` on a 1×2 array (second pixel 2.1 times as fast) sampled at ``steps`` times."""
    times = torch.linspace(0, duration, steps, dtype=torch.float64)
    logs = torch.stack([rate * times, 2.1 * rate * times], dim=-1).float()[:, None, :]
    return logs, times


def test_ramp_fires_at_every_threshold_crossing() -> None:
    logs, times = ramp(2.9)
    c = torch.tensor([[0.2, 0.2]])
    events = simulate_events(logs, times, c, c)
    for pixel, rate in ((0, 2.9), (1, 2.1 * 2.9)):
        t = events.t[events.x == pixel]
        expected = torch.arange(1, int(rate / 0.2) + 1, dtype=torch.float64) * 0.2 / rate
        assert torch.allclose(t, expected, atol=1e-5)
    assert bool((events.p == 1).all()) and bool((events.t[1:] >= events.t[:-1]).all())


def test_falling_ramp_fires_negative_events_with_the_negative_threshold() -> None:
    logs, times = ramp(-2.0)
    events = simulate_events(logs, times, torch.full((1, 2), 0.3), torch.full((1, 2), 0.25))
    assert bool((events.p == -1).all())
    assert int((events.x == 0).sum()) == 8  # floor(2.0 / 0.25)
    assert torch.allclose(events.t[events.x == 0], torch.arange(1, 9, dtype=torch.float64) * 0.125, atol=1e-5)


def test_refractory_period_keeps_every_third_event_when_spacing_is_2_5x_shorter() -> None:
    logs, times = ramp(3.0)
    c = torch.full((1, 2), 0.2)
    spacing = 0.2 / 3.0
    events = simulate_events(logs, times, c, c, refractory=2.5 * spacing)
    t = events.t[events.x == 0]
    expected = spacing * (1 + 3 * torch.arange(5, dtype=torch.float64))
    assert torch.allclose(t, expected, atol=1e-5)


def test_noise_events_have_the_requested_rate_and_balanced_polarity() -> None:
    events = noise_events(50.0, 10, 20, 0.0, 2.0, torch.Generator().manual_seed(0))
    assert abs(len(events) - 20000) < 5 * 20000**0.5
    assert abs(float(events.p.float().mean())) < 0.05
    assert bool((events.t[1:] >= events.t[:-1]).all())


def test_events_window_and_shift() -> None:
    e = Events(
        torch.zeros(4, dtype=torch.long),
        torch.zeros(4, dtype=torch.long),
        torch.tensor([0.1, 0.2, 0.3, 0.4], dtype=torch.float64),
        torch.ones(4, dtype=torch.long),
    )
    assert torch.equal(e.window(0.15, 0.35).t, torch.tensor([0.2, 0.3], dtype=torch.float64))
    assert torch.allclose(
        e.shifted(0.01).window(0.205, 0.315).t, torch.tensor([0.21, 0.31], dtype=torch.float64)
    )


def test_low_light_frame_is_noisier_but_equally_bright_and_8_bit() -> None:
    sharp = torch.full((3, 3, 32, 32), 0.5)
    generator = torch.Generator().manual_seed(0)
    well_lit = expose_rgb(sharp, 1.0, 4000.0, 2.0, generator)
    dark = expose_rgb(sharp, 0.04, 4000.0, 2.0, generator)
    assert abs(float(dark.mean()) - 0.5) < 0.01 and abs(float(well_lit.mean()) - 0.5) < 0.01
    assert float(dark.std()) > 3 * float(well_lit.std())
    assert torch.allclose(dark * 255, (dark * 255).round(), atol=1e-4)
