"""Claim (issue 19): on an oblique flight with walls and tree crowns seen from the side, 3D Gaussians beat
the texture on the LiDAR DEM on held-out-view PSNR (mean of per-view PSNR against sharp, well-lit views).

Setup: a 0.8 s oblique flight (cameras 35° off nadir at 40 m, sharp capture, 18 training and 6 held-out
views of 48×64), RGB only. Texture: 1.25 m texels, 200 Adam steps of 8 frames at lr 0.1. Gaussians: every
2 m on the DEM and down its walls (``wall_fill``), only points some frame sees, SH degree 1, 3DGS's
learning rates, 150 steps of 4 frames (too short for density control, which starts at step 100 and stops
at half the fit). Tuned on seed 11 only (the step counts, and finding that the rasterizer lacked the
reference's Jacobian clamp for off-screen Gaussians); this test uses seed 21.

Measured (held-out PSNR dB, Gaussians / texture / gap; CPU time of the Gaussian fit ~35 s at load
9–17): seed 11 22.35 / 19.28 / +3.07 (tuning), seed 12 21.61 / 19.24 / +2.37, seed 13 23.04 / 20.18 /
+2.86: mean gap 2.77 dB, standard deviation 0.36 dB. Margin: 1.5 dB, the smallest gap less two standard
deviations (rounded down). Each seed's flight and both fits ran from a cleared cache (training is not
bit-reproducible; the spread above is across independent runs). The nearest-texel least-squares DEM
texture (``dem_floor``) of seed 11 scores 22.17 dB (not a strict bound for the bilinear texture).
Mutations, run by hand: Gaussians flattened onto the DEM (z-scale 1 cm; means, scales and rotations
frozen; SH degree 0; no wall fill) scored 19.39 dB on seed 21 against the texture's 18.67: it fails.
Gaussians only pinned (means frozen, no wall fill, scales and SH free) still beat the texture by 2.0 dB
on seed 11: an anisotropic Gaussian on the DEM can stand up as a wall, so pinning alone does not break
the claim.
"""

from __future__ import annotations

import pytest
import torch

from litlab.datamodules.events import FlightConfig, load_sequence
from litlab.fitting import Fitter
from litlab.methods.skyevents.fitting import fit
from litlab.methods.skyevents.objective import EventReconstruction
from litlab.methods.skyevents.study import held_out
from tests.methods.skyevents.flights import OBLIQUE_FLIGHT

SEED = 21
MARGIN = 1.5
FLIGHT = {**OBLIQUE_FLIGHT, "seed": SEED, "condition": "normal", "time_offset": 0.0}
GAUSSIANS = {"splat_spacing": 2.0, "wall_fill": True, "seen_only": True}


@pytest.fixture(scope="module")
def scores() -> dict[str, float]:
    """Held-out PSNR of both renderers trained on the same oblique flight."""
    sequence = load_sequence(FlightConfig(**FLIGHT))
    train, test = held_out(sequence)
    out = {}
    for renderer, options, steps, batch in (
        ("texture", {}, 200, 8),
        ("gaussians", GAUSSIANS, 150, 4),
    ):
        torch.manual_seed(SEED)
        objective = EventReconstruction(event_loss="none", renderer=renderer, exposure_samples=1, **options)
        objective.build(sequence, 0.0)
        fit(Fitter(), objective, sequence, train, steps, batch_size=batch, seed=SEED)
        out[renderer] = float(objective.evaluate(sequence, test)["psnr"])
    return out


@pytest.mark.slow
def test_gaussians_beat_the_dem_texture_on_an_oblique_flight(scores) -> None:
    assert scores["gaussians"] > scores["texture"] + MARGIN, scores
