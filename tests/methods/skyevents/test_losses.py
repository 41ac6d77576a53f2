"""Event frames, the overlap mask and RER against brute-force loops."""

from __future__ import annotations

import torch

from litlab.datamodules.uav.geometry import HeightField, Intrinsics, nadir_rotation
from litlab.datamodules.uav.sensors import Events
from litlab.methods.skyevents.losses import (
    event_frames,
    overlap_mask,
    region_event_loss,
    whole_frame_event_loss,
)


def random_events(n: int = 300, height: int = 6, width: int = 8) -> Events:
    g = torch.Generator().manual_seed(0)
    t, _ = torch.sort(torch.rand(n, generator=g, dtype=torch.float64))
    return Events(
        torch.randint(0, width, (n,), generator=g),
        torch.randint(0, height, (n,), generator=g),
        t,
        torch.randint(0, 2, (n,), generator=g) * 2 - 1,
    )


def test_event_frames_match_a_loop() -> None:
    events = random_events()
    t_a, t_b = torch.tensor([0.1, 0.5, 0.0]), torch.tensor([0.3, 0.9, 0.05])
    polarity, counts = event_frames(events, t_a, t_b, 6, 8)
    for w in range(3):
        expected_p, expected_c = torch.zeros(6, 8), torch.zeros(6, 8)
        for x, y, t, p in zip(events.x, events.y, events.t, events.p, strict=True):
            if t_a[w] <= t < t_b[w]:
                expected_p[y, x] += p
                expected_c[y, x] += 1
        assert torch.equal(polarity[w, 0], expected_p) and torch.equal(counts[w, 0], expected_c)


def brute_rer(delta, polarity, counts, mask, patch, min_events, eps=1e-2) -> torch.Tensor:
    terms = []
    for b in range(delta.shape[0]):
        for i in range(0, delta.shape[2] - patch + 1, patch):
            for j in range(0, delta.shape[3] - patch + 1, patch):
                m = mask[b, 0, i : i + patch, j : j + patch].float()
                if (counts[b, 0, i : i + patch, j : j + patch] * m).sum() < min_events:
                    continue
                r = (delta[b, 0, i : i + patch, j : j + patch] * m).flatten()
                e = (polarity[b, 0, i : i + patch, j : j + patch] * m).flatten()
                terms.append((r / (r.norm() + eps) - e / (e.norm() + eps)).abs().sum())
    return torch.stack(terms).mean()


def test_region_loss_matches_a_loop_and_ignores_masked_and_sparse_regions() -> None:
    g = torch.Generator().manual_seed(1)
    delta = torch.randn(2, 1, 9, 13, generator=g)
    polarity = torch.randint(-3, 4, (2, 1, 9, 13), generator=g).float()
    counts = polarity.abs() + torch.randint(0, 2, (2, 1, 9, 13), generator=g)
    mask = torch.rand(2, 1, 9, 13, generator=g) > 0.3
    mask[1, :, :4, :4] = False
    got = region_event_loss(delta, polarity, counts, mask, patch=4, min_events=10)
    assert torch.allclose(got, brute_rer(delta, polarity, counts, mask, 4, 10), atol=1e-5)


def test_region_loss_is_invariant_to_a_per_region_contrast_scale_but_whole_frame_is_not() -> None:
    g = torch.Generator().manual_seed(2)
    polarity = torch.randint(-2, 3, (1, 1, 8, 8), generator=g).float()
    counts, mask = polarity.abs() + 1, torch.ones(1, 1, 8, 8, dtype=torch.bool)
    scale = torch.ones(1, 1, 8, 8)
    scale[..., 4:, :] = 0.3  # low light halves the contrast in one region
    matched = region_event_loss(0.2 * polarity, polarity, counts, mask, patch=4, min_events=1, eps=0.0)
    dimmed = region_event_loss(0.2 * polarity * scale, polarity, counts, mask, patch=4, min_events=1, eps=0.0)
    assert float(matched) < 1e-5 and float(dimmed) < 1e-5
    assert float(whole_frame_event_loss(0.2 * polarity * scale, polarity, 0.2)) > 1e-3


def test_overlap_mask_is_full_for_the_same_camera_and_partial_for_a_wider_one() -> None:
    surface = HeightField(torch.zeros(2, 2), (-200.0, 200.0, -200.0, 200.0))
    rgb = Intrinsics.from_fov(16, 12, 50.0)
    wide = Intrinsics.from_fov(16, 12, 80.0)
    rotation, centre = nadir_rotation(torch.tensor([0.0])), torch.tensor([[0.0, 0.0, 80.0]])
    assert bool(overlap_mask(rgb, rotation, centre, rgb, rotation, centre, surface).all())
    mask = overlap_mask(wide, rotation, centre, rgb, rotation, centre, surface)[0, 0]
    assert bool(mask[6, 8]) and not bool(mask[0, 0]) and 0.2 < float(mask.float().mean()) < 0.8
