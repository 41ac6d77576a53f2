"""GTA's pieces against brute force, and GTA recovering a planted offset on a noise-free sequence."""

from __future__ import annotations

import pytest
import torch

from litlab.datamodules.events import FlightConfig, load_sequence
from litlab.datamodules.uav.sensors import Events, simulate_events
from litlab.methods.skyevents.gta import (
    compensate_latency,
    edge_gradients,
    estimate_offset_gta,
    flat_ground,
    frame_event_indices,
    gta_score,
)


def test_frame_event_indices_match_a_loop() -> None:
    t, _ = torch.sort(torch.rand(500, generator=torch.Generator().manual_seed(0), dtype=torch.float64))
    centres = torch.tensor([0.1, 0.5, 0.52, 0.99])
    index, frame = frame_event_indices(t, centres, 0.03, stride=3)
    expected = [
        (i, k) for k in range(4) for i in range(0, 500, 3) if abs(float(t[i]) - float(centres[k])) < 0.03
    ]
    assert list(zip(index.tolist(), frame.tolist(), strict=True)) == expected


def test_latency_compensation_moves_ramp_events_half_an_interval_back() -> None:
    times = torch.linspace(0, 1, 2001, dtype=torch.float64)
    logs = (40.0 * times).float()[:, None, None]  # an event every 5 ms
    events = simulate_events(logs, times, torch.full((1, 1), 0.2), torch.full((1, 1), 0.2))
    fixed = compensate_latency(events)
    assert torch.allclose(fixed.t[1:], events.t[1:] - 0.0025, atol=1e-6)
    assert float(fixed.t[0]) == pytest.approx(float(events.t[0]))  # no earlier event to measure from
    mixed = Events.concatenate([events, Events(events.x, events.y + 1, events.t, -events.p)])
    assert torch.allclose(compensate_latency(mixed).t[2:], mixed.t[2:] - 0.0025, atol=1e-6)


@pytest.mark.parametrize("offset", [0.004, 0.017])
def test_gta_recovers_a_planted_offset_on_a_noise_free_sequence(offset: float) -> None:
    flight = FlightConfig(
        seed=3, condition="normal", duration=0.8, noise_rate=0.0, read_noise=0.0, time_offset=0.0
    )
    sequence = load_sequence(flight).with_offset(offset)
    result = estimate_offset_gta(sequence, search=0.03)
    assert abs(result.offset - offset) < 1e-3, (
        f"GTA {1e3 * result.offset:.3f} ms vs planted {1e3 * offset} ms"
    )
    assert abs(float(result.offsets[result.scores.argmin()]) - offset) <= 1e-3  # the coarse curve's minimum


def test_flat_ground_ablation_replaces_only_the_lidar_dem() -> None:
    sequence = load_sequence(FlightConfig(seed=5, condition="low_light", duration=0.4, time_offset=0.007))
    flat = flat_ground(sequence)
    heights = sequence.surface.heights
    assert float(heights.std()) > 1.0  # the scene has buildings and trees
    torch.testing.assert_close(flat.surface.heights, torch.full_like(heights, float(heights.mean())))
    assert flat.events is sequence.events and flat.key is None and sequence.surface.heights is heights
    gradients = edge_gradients(sequence.frames)
    assert gta_score(sequence, 0.007, gradients) != gta_score(flat, 0.007, gradients)  # GTA reads the DEM
    with pytest.raises(ValueError, match="geometry"):
        estimate_offset_gta(sequence, geometry="dem")
