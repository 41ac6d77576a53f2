"""The synthetic flight, its cache, the DataModule's splits, and the loader for real recordings."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pytest
import torch

from litlab.core.errors import LitlabError
from litlab.datamodules.events import FlightConfig, UAVEventsDataModule, load_recording, load_sequence
from litlab.fitting import Fitter
from litlab.methods.skyevents.fitting import fit
from litlab.methods.skyevents.objective import EventReconstruction
from litlab.methods.skyevents.study import held_out

SMALL = {"seed": 5, "condition": "low_light", "duration": 0.4, "time_offset": 0.007}


@pytest.fixture(scope="module")
def sequence():
    return load_sequence(FlightConfig(**SMALL))


def test_synthetic_flight_has_consistent_sensors(sequence) -> None:
    k, e = sequence.rgb_intrinsics, sequence.event_intrinsics
    assert (
        sequence.frames.shape == (12, 3, k.height, k.width)
        and sequence.sharp_views.shape == sequence.frames.shape
    )
    assert (e.height, e.width) == (32, 48)
    assert sequence.frames.min() >= 0 and sequence.frames.max() <= 1
    events = sequence.events
    assert bool((events.t[1:] >= events.t[:-1]).all()) and set(events.p.unique().tolist()) == {-1, 1}
    assert int(events.x.max()) < e.width and int(events.y.max()) < e.height
    assert float(events.t.min()) >= 0.007 - 1e-9  # event clock = true time + offset
    assert sequence.depths.min() > 50  # flown at 80 m over roofs of at most 18 m


def test_cache_returns_the_same_flight(sequence) -> None:
    again = load_sequence(FlightConfig(**SMALL))
    assert torch.equal(again.frames, sequence.frames) and torch.equal(again.events.t, sequence.events.t)


def test_cached_flight_at_another_offset_equals_simulating_it_there(sequence) -> None:
    """One simulation (at offset 0) serves every clock offset: re-stamped events equal a fresh simulation."""
    fresh = load_sequence(FlightConfig(**SMALL), cache=False)
    assert torch.equal(fresh.events.t, sequence.events.t) and torch.equal(fresh.events.x, sequence.events.x)
    assert torch.equal(fresh.frames, sequence.frames) and sequence.time_offset == SMALL["time_offset"]
    assert sequence.key == FlightConfig(**SMALL).key()


def test_datamodule_holds_out_every_fourth_frame() -> None:
    dm = UAVEventsDataModule(flight=SMALL, batch_size=4)
    dm.setup("fit")
    assert dm.val_idx.tolist() == [2, 10] and dm.test_idx.tolist() == [6]
    assert len(dm.train_idx) == 9 and next(iter(dm.train_dataloader())).shape == (4,)


def write_recording(sequence, root: Path) -> None:
    """The synthetic flight in the README's real-recording layout."""
    root.mkdir()
    calib = {
        "rgb": asdict(sequence.rgb_intrinsics),
        "event": asdict(sequence.event_intrinsics),
        "event_in_rgb": {
            "rotation": sequence.event_rotation.tolist(),
            "translation": sequence.event_translation.tolist(),
        },
        "exposure_s": sequence.exposure,
        "event_threshold": 0.2,
    }
    (root / "calib.json").write_text(json.dumps(calib))
    traj = sequence.trajectory
    table = torch.cat([traj.times[:, None], traj.centres, traj.quats], dim=1).numpy()
    np.savetxt(root / "poses.csv", table, delimiter=",", header="t,x,y,z,qw,qx,qy,qz", comments="")
    np.save(root / "rgb.npy", (sequence.frames.permute(0, 2, 3, 1) * 255).round().byte().numpy())
    np.savetxt(root / "rgb_times.txt", sequence.frame_times.numpy())
    ev = sequence.events
    np.savez(root / "events.npz", x=ev.x.numpy(), y=ev.y.numpy(), t=ev.t.numpy(), p=(ev.p > 0).numpy())
    heights = sequence.surface.heights
    x0, x1, y0, y1 = sequence.surface.bounds
    ys, xs = torch.meshgrid(
        torch.linspace(y0, y1, heights.shape[0]), torch.linspace(x0, x1, heights.shape[1]), indexing="ij"
    )
    np.save(root / "lidar.npy", torch.stack([xs, ys, heights], -1).reshape(-1, 3).numpy())


def test_real_recording_loader_reads_the_documented_layout(sequence, tmp_path: Path) -> None:
    write_recording(sequence, tmp_path / "flight")
    loaded = load_recording(tmp_path / "flight", lidar_cell=1.25)
    assert torch.allclose(loaded.frames, sequence.frames, atol=1e-6)
    assert torch.equal(loaded.events.p, sequence.events.p) and torch.allclose(
        loaded.events.t, sequence.events.t
    )
    t = sequence.frame_times
    for a, b in zip(loaded.event_pose(t), sequence.event_pose(t), strict=True):
        assert torch.allclose(a, b, atol=1e-4)
    xy = sequence.rgb_pose(t)[1][:, :2]
    assert torch.allclose(loaded.surface.height(xy), sequence.surface.height(xy), atol=0.5)
    assert loaded.gt_texture is None and loaded.time_offset is None


def test_missing_recording_files_say_what_to_provide(tmp_path: Path) -> None:
    with pytest.raises(LitlabError, match="events.npz"):
        load_recording(tmp_path)
    with pytest.raises(LitlabError, match="condition"):
        load_sequence(FlightConfig(condition="fog"), cache=False)


def test_a_recording_trains_gaussians_and_is_scored_on_its_held_out_frames(sequence, tmp_path: Path) -> None:
    """A real recording has no sharp ground truth: held-out views are scored through the capture model
    (the exposure mean of renders) against the captured frames, and a short Gaussian fit with RER
    improves that score."""
    write_recording(sequence, tmp_path / "flight")
    recording = load_recording(tmp_path / "flight", lidar_cell=1.25)
    objective = EventReconstruction(event_loss="rer", renderer="gaussians", splat_spacing=4.0)
    objective.build(recording, SMALL["time_offset"])
    train, test = held_out(recording)
    before = objective.evaluate(recording, test)
    fit(Fitter(), objective, recording, train, steps=15, batch_size=4)
    after = objective.evaluate(recording, test)
    assert bool(torch.isfinite(after["ssim"]))
    assert float(after["psnr"]) > float(before["psnr"]), (before, after)
