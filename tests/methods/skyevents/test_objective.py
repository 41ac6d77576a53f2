"""The reconstruction objective and its LightningModule wiring on a short flight."""

from __future__ import annotations

import pytest
import torch

from litlab.core.errors import ConfigError
from litlab.datamodules.events import FlightConfig, load_sequence
from litlab.fitting import Fitter
from litlab.methods.skyevents.fitting import fit
from litlab.methods.skyevents.module import EventReconstructor
from litlab.methods.skyevents.objective import EventReconstruction
from litlab.methods.skyevents.study import held_out

SMALL = {"seed": 5, "condition": "low_light", "duration": 0.4, "time_offset": 0.007}


@pytest.fixture(scope="module")
def sequence():
    return load_sequence(FlightConfig(**SMALL))


@pytest.mark.parametrize("event_loss", ["none", "full", "rer"])
def test_each_setup_trains_and_lowers_its_loss(sequence, event_loss: str) -> None:
    weight = {"none": 0.0, "full": 0.006, "rer": 0.0003}[event_loss]  # the packaged configs' weights
    objective = EventReconstruction(event_loss=event_loss, event_weight=weight)
    objective.build(sequence, 0.007)
    train, test = held_out(sequence)
    before = objective.evaluate(sequence, test)["psnr"]
    rgb_before = float(objective.losses(sequence, train)["rgb"])
    history = fit(Fitter(), objective, sequence, train, steps=25)
    losses = objective.losses(sequence, train)
    assert set(losses) == ({"rgb", "total"} if event_loss == "none" else {"rgb", "event", "total"})
    assert float(losses["rgb"]) < 0.7 * rgb_before and history[-1] < history[0]
    assert objective.evaluate(sequence, test)["psnr"] > before + 3


def test_rer_gradient_reaches_only_texels_seen_by_the_event_camera(sequence) -> None:
    objective = EventReconstruction(event_loss="rer", event_weight=1.0, min_events=1)
    objective.build(sequence, 0.007)
    with torch.no_grad():
        objective.texture.logits.normal_(generator=torch.Generator().manual_seed(0))
    event = objective.losses(sequence, torch.tensor([4, 5]))["event"]
    event.backward()
    touched = objective.texture.logits.grad.abs().sum(0) > 0
    assert float(event.detach()) > 0 and 0 < float(touched.float().mean()) < 0.2


def rer_touched_texels(sequence, overlap_mask: bool) -> torch.Tensor:
    """Texels ``(Ht, Wt)`` that one RER step on frames 4, 5 sends gradient to."""
    objective = EventReconstruction(
        event_loss="rer", event_weight=1.0, min_events=1, overlap_mask=overlap_mask
    )
    objective.build(sequence, 0.007)
    with torch.no_grad():
        objective.texture.logits.normal_(generator=torch.Generator().manual_seed(0))
    torch.manual_seed(0)  # the same event windows for both arms
    objective.losses(sequence, torch.tensor([4, 5]))["event"].backward()
    return objective.texture.logits.grad.abs().sum(0) > 0


def test_overlap_mask_flag_switches_rer_between_omega_and_the_whole_event_frame(sequence) -> None:
    omega = EventReconstruction().rer_mask(sequence, sequence.frame_times[4:6])
    assert 0.2 < float(omega.float().mean()) < 0.95  # the event camera sees more than the RGB camera
    with_mask, without = rer_touched_texels(sequence, True), rer_touched_texels(sequence, False)
    assert bool((with_mask <= without).all()) and int(without.sum()) > 1.2 * int(with_mask.sum())


def test_unknown_event_loss_is_rejected() -> None:
    with pytest.raises(ValueError, match="event_loss"):
        EventReconstruction(event_loss="l2")


def test_module_offset_choices(sequence) -> None:
    objective = EventReconstruction()
    assert EventReconstructor(objective, torch.optim.Adam, offset="true").resolve_offset(sequence) == 0.007
    assert EventReconstructor(objective, torch.optim.Adam, offset=0.002).resolve_offset(sequence) == 0.002
    with pytest.raises(ConfigError, match="gta_geometry"):
        EventReconstructor(objective, torch.optim.Adam, gta_geometry="dem")


def test_psnr_is_the_mean_of_per_view_psnrs(sequence) -> None:
    objective = EventReconstruction(event_loss="none", event_weight=0.0)
    objective.build(sequence, 0.0)
    _, test = held_out(sequence)
    with torch.no_grad():
        objective.texture.logits.normal_(generator=torch.Generator().manual_seed(1))
        pred = objective.render_rgb(sequence, sequence.frame_times[test]).clamp(0, 1)
    mse = (pred - sequence.sharp_views[test]).square().flatten(1).mean(1)
    per_view = (10 * torch.log10(1 / mse)).mean()
    torch.testing.assert_close(objective.evaluate(sequence, test)["psnr"], per_view, rtol=1e-5, atol=1e-5)


@pytest.mark.slow
@pytest.mark.parametrize("event_loss", ["none", "rer"])
def test_the_gaussian_renderer_trains_through_the_same_objective(sequence, event_loss: str) -> None:
    """3DGS on the DEM (5 m spacing): RGB and event losses reach the Gaussians, density control runs."""
    objective = EventReconstruction(
        event_loss=event_loss,
        event_weight=0.0003 if event_loss == "rer" else 0.0,
        renderer="gaussians",
        splat_spacing=5.0,
        # density control runs in the first half of the fit: step 2 of 8
        density={"start": 2, "densify_every": 2, "grad_threshold": 1e-5, "max_gaussians": 4000},
        splat_learning_rates={"sh": 5e-2},
    )
    objective.build(sequence, 0.007)
    train, test = held_out(sequence)
    n_start = len(objective.scene.gaussians)
    before = objective.evaluate(sequence, test)["psnr"]
    history = fit(Fitter(), objective, sequence, train, steps=8, batch_size=2)
    assert history[-1] < history[0]
    assert objective.evaluate(sequence, test)["psnr"] > before
    assert len(objective.scene.gaussians) > n_start, "density control added Gaussians"


def test_an_unknown_renderer_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="renderer must be one of"):
        EventReconstruction(renderer="nerf")
