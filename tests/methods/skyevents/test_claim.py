"""Claim checks with their ablations, CI-sized: 1.6 s synthetic flights, seed 3, 120 Adam steps.

The loss weights were chosen by hand on seed 0 (README), so these tests use seed 3. Margins are about
half the smallest gap measured on the three fresh seeds 2, 3, 4 (the same ``reconstruct`` calls; the
README's "Claim test" table), where held-out PSNR (dB) differences were:
- low light: RER (d) − RGB only (a) = +1.16 / +1.40 / +1.11; RER − whole-frame (c) = +0.77 / +0.98 / +0.69;
  RER without its overlap mask (e) − RER (d) = +0.33 / +0.27 / +0.44, i.e. the mask costs PSNR here.
- blur: whole-frame with GTA's δ (c) − RGB only (a) = +1.22 / +1.25 / +1.38; c − whole-frame at δ = 0 (b)
  = +1.41 / +1.62 / +1.63 (RER under blur loses to a by 0.9–1.3 dB: not asserted, README).
- GTA |error| at a planted 10 ms offset: blur 0.90 / 1.46 / 1.10 ms, low light 0.84 / 1.10 / 0.87 ms
  (a per-flight bias, the same for every planted offset); with flat ground instead of the LiDAR DEM the
  estimate moved by at most 0.1 ms, one fine-grid step (no measured difference: the cameras are nearly
  co-located, so height errors barely move a reprojected event).
"""

from __future__ import annotations

from functools import cache

import pytest

from litlab.datamodules.events import FlightConfig, UAVSequence, load_sequence
from litlab.fitting import Fitter
from litlab.methods.skyevents.gta import estimate_offset_gta, estimate_offset_xcorr
from litlab.methods.skyevents.study import reconstruct

SEED = 3  # not the seed the loss weights were tuned on (0), nor the README's earlier table (0, 1)
WEIGHTS = {"full": 0.006, "rer": 0.0003}


@cache
def flight(condition: str) -> UAVSequence:
    return load_sequence(FlightConfig(condition=condition, time_offset=0.01, seed=SEED))


@cache
def gta_offset(condition: str) -> float:
    return estimate_offset_gta(flight(condition)).offset


@cache
def psnr(condition: str, setup: str) -> float:
    """Held-out PSNR of one setup, trained once per test session (the tests share runs)."""
    sequence = flight(condition)
    metrics = reconstruct(Fitter(), sequence, setup, 120, WEIGHTS, gta_offset=gta_offset(condition))[1]
    print(f"{condition} {setup}: {metrics['psnr']:.2f} dB")
    return metrics["psnr"]


def assert_gain(condition: str, better: str, worse: str, margin: float) -> None:
    gain = psnr(condition, better) - psnr(condition, worse)
    assert gain > margin, f"{condition}: {better} − {worse} = {gain:.2f} dB, expected > {margin} dB"


@pytest.mark.slow
@pytest.mark.parametrize("condition", ["blur", "low_light"])
def test_gta_is_about_a_millisecond_beats_both_baselines_and_needs_no_lidar(condition: str) -> None:
    base = flight(condition)
    for offset in (0.001, 0.02):
        sequence = base.with_offset(offset)
        gta = abs(estimate_offset_gta(sequence).offset - offset)
        xcorr = abs(estimate_offset_xcorr(sequence).offset - offset)
        print(f"{condition} {1e3 * offset:.0f} ms: GTA {1e3 * gta:.3f} ms, xcorr {1e3 * xcorr:.3f} ms")
        assert gta < 2e-3 and gta < xcorr
        if offset > 2e-3:  # GTA's 0.8–1.5 ms bias is no better than no alignment at a 1 ms offset (README)
            assert gta < offset
    flat = abs(estimate_offset_gta(sequence, geometry="flat").offset - offset)
    assert abs(flat - gta) < 0.3e-3, f"flat ground {1e3 * flat:.3f} ms vs LiDAR {1e3 * gta:.3f} ms"


@pytest.mark.slow
def test_gta_aligned_events_beat_rgb_only_and_unaligned_events_under_blur() -> None:
    assert_gain("blur", "c_full_gta", "a_rgb_only", 0.6)
    assert_gain("blur", "c_full_gta", "b_full_no_align", 0.7)


@pytest.mark.slow
def test_rer_beats_rgb_only_and_the_whole_frame_loss_in_low_light() -> None:
    assert_gain("low_light", "d_rer_gta", "a_rgb_only", 0.5)
    assert_gain("low_light", "d_rer_gta", "c_full_gta", 0.35)


@pytest.mark.slow
def test_rer_overlap_mask_costs_psnr_in_low_light() -> None:
    """Not the paper's claim: at our scale RER over the whole event frame beats RER inside Ω."""
    assert_gain("low_light", "e_rer_no_mask", "d_rer_gta", 0.12)
