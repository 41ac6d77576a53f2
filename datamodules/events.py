"""Event + RGB + LiDAR UAV sequences: a seeded synthetic survey flight (cached) and a loader for recordings.

The synthetic sequence stands in for SkyEvents (gated, ~2 TB): a procedural aerial scene (roads,
roofs with heights, vegetation) flown at fixed altitude by a nadir RGB camera and a rigidly mounted
event camera with its own intrinsics, extrinsics and a known clock offset. See
``src/litlab/methods/skyevents/README.md`` for the real-recording file layout.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from functools import partial
from pathlib import Path

import numpy as np
import torch
from scipy import ndimage
from torch.nn import functional as F
from torch.utils.data import DataLoader

from litlab.core.cache import cached_tensors
from litlab.core.errors import LitlabError
from litlab.datamodules.base import GlobalBatchDataModule
from litlab.datamodules.uav.geometry import (
    HeightField,
    Intrinsics,
    Trajectory,
    axis_angle_rotation,
    compose_extrinsics,
    nadir_rotation,
    quaternion_to_matrix,
)
from litlab.datamodules.uav.render import GroundTexture, log_luminance, render, render_depth
from litlab.datamodules.uav.sensors import Events, expose_rgb, noise_events, simulate_events
from litlab.datamodules.uav.structure import StructuredScene

CONDITIONS = {
    # exposure (s), light gain (1 = well lit), event noise rate (Hz per pixel)
    "normal": {"exposure": 0.002, "gain": 1.0, "noise_rate": 0.5},
    "blur": {"exposure": 0.030, "gain": 1.0, "noise_rate": 0.5},
    "low_light": {"exposure": 0.010, "gain": 0.04, "noise_rate": 5.0},
}


@dataclass
class UAVSequence:
    """One flight: RGB frames, an event stream, geometry and (for synthetic data) the ground truth.

    ``frames (K, 3, H, W)`` at mid-exposure ``frame_times (K,)`` (RGB clock); ``events`` stamped on the
    event clock, ``t_event = t_rgb + time_offset``; ``trajectory`` is the RGB camera's; the event camera
    sits at ``event_rotation (3, 3)``, ``event_translation (3,)`` in the RGB camera frame; ``surface`` is
    the LiDAR height field. ``gt_texture`` and ``sharp_views (K, 3, H, W)`` (well lit, no blur) exist
    only for synthetic data.
    """

    frames: torch.Tensor
    frame_times: torch.Tensor
    exposure: float
    rgb_intrinsics: Intrinsics
    event_intrinsics: Intrinsics
    event_rotation: torch.Tensor
    event_translation: torch.Tensor
    trajectory: Trajectory
    events: Events
    surface: HeightField
    texture_bounds: tuple[float, float, float, float]
    time_offset: float | None = None
    event_threshold: float = 0.2
    gt_texture: GroundTexture | None = None
    sharp_views: torch.Tensor | None = None
    depths: torch.Tensor | None = None
    key: str | None = None  # identifies a cached synthetic flight (for derived caches such as GTA's offset)

    def rgb_pose(self, t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """RGB camera poses ``(…, 3, 3), (…, 3)`` at RGB-clock times ``t (…)``."""
        return self.trajectory.at(t)

    def event_pose(self, t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Event camera poses at RGB-clock times ``t (…)``."""
        rotation, centre = self.trajectory.at(t)
        return compose_extrinsics(rotation, centre, self.event_rotation, self.event_translation)

    def with_events(self, events: Events) -> UAVSequence:
        """The same flight with another event stream."""
        out = UAVSequence(**{f: getattr(self, f) for f in self.__dataclass_fields__})
        out.events, out.key = events, None
        return out

    def with_offset(self, offset: float) -> UAVSequence:
        """The same flight with the event clock ``offset`` s ahead of the RGB clock (events re-stamped)."""
        out = self.with_events(self.events.shifted(offset - (self.time_offset or 0.0)))
        out.time_offset = offset
        return out


@dataclass
class FlightConfig:
    """The synthetic survey: scene, flight, cameras and sensors (sizes in metres, seconds, pixels)."""

    seed: int = 0
    condition: str = "blur"
    time_offset: float = 0.005
    duration: float = 1.6
    fps: float = 30.0
    altitude: float = 80.0
    image_speed: float = 250.0  # RGB pixels per second; see the README (matches a 1280-px sensor at 15 m/s)
    sway: float = 8.0  # lateral sway amplitude (m), so edges of every orientation move
    rgb_size: tuple[int, int] = (48, 64)
    rgb_hfov: float = 53.0
    event_size: tuple[int, int] = (32, 48)
    event_hfov: float = 70.0
    event_pitch_deg: float = 8.0
    event_baseline: float = 0.15
    event_threshold: float = 0.2
    threshold_spread: float = 0.03
    refractory: float = 0.0005
    event_step: float = 0.0005
    texel: float = 0.625
    lidar_texel: float = 1.25
    lidar_noise: float = 0.05
    full_well: float = 4000.0
    read_noise: float = 2.0
    supersample: int = 3  # rays per pixel side for the ground-truth sensors (area integration)
    noise_rate: float | None = None  # event noise (Hz per pixel); None: the condition's
    # Oblique flight (off by default): walls and tall tree crowns, cameras pitched ``pitch_deg`` off nadir
    # whose look direction turns ``look_turns`` times about the vertical over the flight, rays marched
    # every ``march_step`` m (see ``litlab.datamodules.uav.structure``).
    oblique: bool = False
    pitch_deg: float = 30.0
    look_turns: float = 0.5
    march_step: float = 0.5

    def key(self) -> str:
        fields = asdict(self)
        if not self.oblique:  # nadir flights keep the keys they were cached under before the option
            for name in OBLIQUE_FIELDS:
                fields.pop(name)
        return hashlib.sha1(json.dumps(fields, sort_keys=True).encode()).hexdigest()[:12]


OBLIQUE_FIELDS = ("oblique", "pitch_deg", "look_turns", "march_step")


def fractal_noise(
    shape: tuple[int, int], scales: tuple[int, ...], generator: torch.Generator
) -> torch.Tensor:
    """Smooth noise ``(H, W)`` in about [-1, 1]: random grids of coarseness ``scales``, upsampled, summed."""
    total = torch.zeros(shape)
    for i, scale in enumerate(scales):
        coarse = torch.randn(1, 1, max(2, shape[0] // scale), max(2, shape[1] // scale), generator=generator)
        total += F.interpolate(coarse, size=shape, mode="bicubic", align_corners=True)[0, 0] / (i + 1)
    return total / total.abs().max()


def procedural_scene(
    bounds: tuple[float, float, float, float], texel: float, generator: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """An aerial scene: albedo ``(3, H, W)`` in (0, 1) and heights ``(H, W)`` (m) over ``bounds``.

    Vegetation (textured greens, tree crowns with height), a few roads with lane marks, and buildings
    whose roofs have their own colour, a darker rim and a height of 4–18 m.
    """
    albedo, heights, _ = structured_scene(bounds, texel, generator, tall_trees=False)
    return albedo, heights


def structured_scene(
    bounds: tuple[float, float, float, float], texel: float, generator: torch.Generator, tall_trees: bool
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``procedural_scene`` plus its tree mask ``(H, W)``; ``tall_trees`` raises crowns to 5–10 m with
    steep sides (what an oblique view sees from the side) instead of mounds of at most 4 m."""
    x0, x1, y0, y1 = bounds
    h, w = round((y1 - y0) / texel), round((x1 - x0) / texel)
    ys, xs = torch.meshgrid(torch.linspace(y0, y1, h), torch.linspace(x0, x1, w), indexing="ij")
    veg = fractal_noise((h, w), (64, 16, 4), generator)
    albedo = torch.stack([0.25 + 0.10 * veg, 0.45 + 0.15 * veg, 0.18 + 0.08 * veg])
    heights = torch.zeros(h, w)
    crowns = fractal_noise((h, w), (12, 6), generator)
    trees = crowns > 0.35
    albedo = torch.where(
        trees, torch.stack([0.10 + 0.05 * crowns, 0.28 + 0.1 * crowns, 0.08 + 0 * crowns]), albedo
    )
    crown_height = 5 + 8 * (crowns - 0.35) if tall_trees else 6 * (crowns - 0.35)
    heights = torch.where(trees, crown_height, heights)
    n_roads = max(2, round((x1 - x0) / 120))
    for _ in range(n_roads):
        angle = torch.rand((), generator=generator).item() * math.pi
        cx = x0 + torch.rand((), generator=generator).item() * (x1 - x0)
        normal = (xs - cx) * math.cos(angle) + ys * math.sin(angle)
        road = normal.abs() < 4.0
        albedo = torch.where(road, torch.tensor([0.42, 0.42, 0.44])[:, None, None], albedo)
        albedo = torch.where(normal.abs() < 0.35, torch.tensor([0.95, 0.95, 0.9])[:, None, None], albedo)
        heights = torch.where(road, torch.zeros_like(heights), heights)
        trees = trees & ~road
    roof_colours = torch.tensor(
        [[0.70, 0.25, 0.18], [0.55, 0.55, 0.58], [0.80, 0.78, 0.72], [0.35, 0.22, 0.15]]
    )
    n_buildings = round((x1 - x0) * (y1 - y0) / 900)
    for _ in range(n_buildings):
        u = torch.rand(5, generator=generator)
        bx, by = x0 + u[0].item() * (x1 - x0), y0 + u[1].item() * (y1 - y0)
        half_x, half_y = 4 + 8 * u[2].item(), 4 + 8 * u[3].item()
        dx, dy = (xs - bx).abs(), (ys - by).abs()
        roof = (dx < half_x) & (dy < half_y)
        rim = roof & ((dx > half_x - 1.0) | (dy > half_y - 1.0))
        colour = roof_colours[torch.randint(0, len(roof_colours), (), generator=generator)]
        ridge = 0.08 * torch.sign(xs - bx)  # a pitched roof: two shades
        albedo = torch.where(roof, (colour[:, None, None] + ridge).clamp(0.02, 0.98), albedo)
        albedo = torch.where(rim, albedo * 0.5, albedo)
        heights = torch.where(roof, torch.full_like(heights, 4 + 14 * u[4].item()), heights)
        trees = trees & ~roof
    albedo = ndimage.gaussian_filter(albedo.numpy(), sigma=(0, 0.8, 0.8))
    return torch.from_numpy(albedo).clamp(0.02, 0.98).float(), heights, trees.float()


def survey_trajectory(cfg: FlightConfig, focal: float, margin: float = 0.2) -> Trajectory:
    """The RGB camera's flight: one survey leg along +x at fixed altitude with speed changes and sway.

    Sampled at 1 kHz over ``[-margin, duration + margin]`` so offsets of up to ``margin`` stay inside.
    """
    speed = cfg.image_speed * cfg.altitude / focal
    t = torch.arange(-margin, cfg.duration + margin, 0.001, dtype=torch.float64)
    w_speed, w_sway, w_yaw = 2 * math.pi * 0.9, 2 * math.pi * 0.7, 2 * math.pi * 1.1
    x = speed * (t - 0.25 / w_speed * torch.cos(w_speed * t + 1.0))
    y = cfg.sway * torch.sin(w_sway * t)
    z = cfg.altitude + 1.5 * torch.sin(2 * math.pi * 0.5 * t)
    yaw = 0.06 * torch.sin(w_yaw * t)
    centres = torch.stack([x, y, z], dim=-1).float()
    if not cfg.oblique:
        return Trajectory(t.float(), nadir_rotation(yaw.float()), centres)
    look = yaw + 2 * math.pi * cfg.look_turns * t / cfg.duration
    tilt = axis_angle_rotation(torch.tensor([1.0, 0.0, 0.0]), -math.radians(cfg.pitch_deg))
    return Trajectory(t.float(), nadir_rotation(look.float()) @ tilt, centres)


def dem_from_points(
    points: torch.Tensor, bounds: tuple[float, float, float, float], cell: float
) -> HeightField:
    """A height field from LiDAR ``points (N, 3)``: highest return per ``cell``-sized bin, holes nearest."""
    x0, x1, y0, y1 = bounds
    h, w = round((y1 - y0) / cell) + 1, round((x1 - x0) / cell) + 1
    col = ((points[:, 0] - x0) / cell).round().long().clamp(0, w - 1)
    row = ((points[:, 1] - y0) / cell).round().long().clamp(0, h - 1)
    grid = torch.full((h * w,), -float("inf")).scatter_reduce(0, row * w + col, points[:, 2], reduce="amax")
    grid = grid.reshape(h, w).numpy()
    empty = ~np.isfinite(grid)
    if empty.all():
        raise LitlabError("the LiDAR points fall outside the scene bounds; check their frame and units")
    _, (ri, ci) = ndimage.distance_transform_edt(empty, return_indices=True)
    return HeightField(torch.from_numpy(grid[ri, ci]).float(), bounds)


def synthesize_sequence(cfg: FlightConfig) -> UAVSequence:
    """Simulate one flight under ``cfg.condition`` (normal, blur, low_light); seconds on a CPU."""
    if cfg.condition not in CONDITIONS:
        raise LitlabError(f"data.condition must be one of {sorted(CONDITIONS)}, got {cfg.condition!r}")
    cond = CONDITIONS[cfg.condition]
    generator = torch.Generator().manual_seed(cfg.seed)
    rgb_k = Intrinsics.from_fov(cfg.rgb_size[1], cfg.rgb_size[0], cfg.rgb_hfov)
    event_k = Intrinsics.from_fov(cfg.event_size[1], cfg.event_size[0], cfg.event_hfov)
    trajectory = survey_trajectory(cfg, rgb_k.fx)
    x_lo, x_hi = float(trajectory.centres[:, 0].min()), float(trajectory.centres[:, 0].max())
    if cfg.oblique:
        half_width = oblique_reach(cfg, rgb_k, event_k) + cfg.sway
    else:
        half_width = 1.3 * cfg.altitude * math.tan(math.radians(max(cfg.rgb_hfov, cfg.event_hfov) / 2))
        half_width += cfg.sway
    bounds = (x_lo - half_width, x_hi + half_width, -half_width, half_width)
    albedo, heights, trees = structured_scene(bounds, cfg.texel, generator, tall_trees=cfg.oblique)
    gt_texture = GroundTexture.from_image(albedo, bounds)
    true_surface = HeightField(heights, bounds)
    if cfg.oblique:
        scene = StructuredScene(gt_texture, true_surface, trees, step=cfg.march_step)
        view, view_depth = scene.render, scene.depth
    else:
        view = partial(render, gt_texture, true_surface)
        view_depth = partial(render_depth, true_surface)
    lidar = lidar_points(true_surface, cfg.lidar_texel, cfg.lidar_noise, generator)
    surface = dem_from_points(lidar, bounds, cfg.lidar_texel)
    event_rotation = axis_angle_rotation(torch.tensor([1.0, 0.0, 0.0]), math.radians(cfg.event_pitch_deg))
    event_translation = torch.tensor([cfg.event_baseline, 0.0, 0.0])

    n_frames = int(cfg.duration * cfg.fps)
    frame_times = (torch.arange(n_frames) + 0.5) / cfg.fps
    n_sub = max(1, round(cond["exposure"] * 1000)) + 1  # 1 kHz sub-renders across the exposure
    sub = torch.linspace(-0.5, 0.5, n_sub) * cond["exposure"] if n_sub > 1 else torch.zeros(1)
    rot, centre = trajectory.at(frame_times[:, None] + sub)
    with torch.no_grad():
        sharp_sub = view(rgb_k, rot.reshape(-1, 3, 3), centre.reshape(-1, 3), cfg.supersample)
        sharp_sub = sharp_sub.reshape(n_frames, n_sub, 3, rgb_k.height, rgb_k.width)
        frames = torch.stack(
            [expose_rgb(s, cond["gain"], cfg.full_well, cfg.read_noise, generator) for s in sharp_sub]
        )
        rot0, centre0 = trajectory.at(frame_times)
        sharp_views = view(rgb_k, rot0, centre0, cfg.supersample)
        depths = view_depth(rgb_k, rot0, centre0)
        events = simulate_event_camera(
            cfg,
            cond,
            view,
            trajectory,
            event_k,
            event_rotation,
            event_translation,
            generator,
        )
    return UAVSequence(
        frames=frames,
        frame_times=frame_times,
        exposure=cond["exposure"],
        rgb_intrinsics=rgb_k,
        event_intrinsics=event_k,
        event_rotation=event_rotation,
        event_translation=event_translation,
        trajectory=trajectory,
        events=events.shifted(cfg.time_offset),
        surface=surface,
        texture_bounds=bounds,
        time_offset=cfg.time_offset,
        event_threshold=cfg.event_threshold,
        gt_texture=gt_texture,
        sharp_views=sharp_views,
        depths=depths,
    )


def oblique_reach(cfg: FlightConfig, rgb_k: Intrinsics, event_k: Intrinsics) -> float:
    """Horizontal distance (m) out to which the pitched cameras see the ground, capped at 75° off nadir."""

    def half_diagonal(k: Intrinsics) -> float:
        return math.degrees(math.atan(math.hypot(k.width / 2, k.height / 2) / k.fx))

    rgb_far = cfg.pitch_deg + half_diagonal(rgb_k)
    event_far = cfg.pitch_deg + abs(cfg.event_pitch_deg) + half_diagonal(event_k)
    if not (cfg.pitch_deg > 0 and rgb_far < 75 and event_far < 88):
        raise LitlabError(
            f"data.flight.pitch_deg={cfg.pitch_deg} puts the views {rgb_far:.0f}° (RGB) and {event_far:.0f}° "
            "(events) off nadir; both must see the ground (RGB under 75°, events under 88°)"
        )
    return cfg.altitude * math.tan(math.radians(max(rgb_far, min(event_far, 75.0))))


def lidar_points(
    surface: HeightField, spacing: float, noise: float, generator: torch.Generator
) -> torch.Tensor:
    """LiDAR returns ``(N, 3)``: the true surface on a jittered ``spacing`` grid with ``noise`` (m) in z."""
    x0, x1, y0, y1 = surface.bounds
    ys, xs = torch.meshgrid(torch.arange(y0, y1, spacing), torch.arange(x0, x1, spacing), indexing="ij")
    xy = torch.stack([xs, ys], dim=-1).reshape(-1, 2)
    xy = xy + spacing * 0.3 * torch.randn(xy.shape, generator=generator)
    z = surface.height(xy) + noise * torch.randn(len(xy), generator=generator)
    return torch.cat([xy, z[:, None]], dim=1)


def simulate_event_camera(
    cfg: FlightConfig,
    cond: dict,
    view: Callable[..., torch.Tensor],
    trajectory: Trajectory,
    intrinsics: Intrinsics,
    rel_rotation: torch.Tensor,
    rel_translation: torch.Tensor,
    generator: torch.Generator,
) -> Events:
    """Events (true time) of the event camera over the flight: ESIM on log luminance plus noise events.

    ``view(intrinsics, rotation, centre, supersample)`` renders the true scene.
    """
    times = torch.arange(0.0, cfg.duration + 1e-9, cfg.event_step, dtype=torch.float64)
    logs = []
    for chunk in times.split(400):
        rot, centre = compose_extrinsics(*trajectory.at(chunk.float()), rel_rotation, rel_translation)
        image = view(intrinsics, rot, centre, cfg.supersample)
        logs.append(log_luminance(image, gain=cond["gain"])[:, 0])
    shape = (intrinsics.height, intrinsics.width)
    spread = cfg.threshold_spread
    c_pos = (cfg.event_threshold + spread * torch.randn(shape, generator=generator)).clamp_min(0.05)
    c_neg = (cfg.event_threshold + spread * torch.randn(shape, generator=generator)).clamp_min(0.05)
    signal = simulate_events(torch.cat(logs), times, c_pos, c_neg, cfg.refractory)
    rate = cond["noise_rate"] if cfg.noise_rate is None else cfg.noise_rate
    noise = noise_events(rate, *shape, 0.0, cfg.duration, generator)
    return Events.concatenate([signal, noise])


# Bump when synthesize_sequence changes what it generates (cached flights are keyed by it).
GENERATOR_VERSION = "2"


def sequence_tensors(sequence: UAVSequence) -> dict[str, torch.Tensor]:
    """A flight as named tensors (what the cache stores; no pickled objects)."""

    def intrinsics(k: Intrinsics) -> torch.Tensor:
        return torch.tensor([k.fx, k.fy, k.cx, k.cy, k.width, k.height], dtype=torch.float64)

    tensors = {
        "frames": sequence.frames,
        "frame_times": sequence.frame_times,
        "scalars": torch.tensor(
            [
                sequence.exposure,
                math.nan if sequence.time_offset is None else sequence.time_offset,
                sequence.event_threshold,
            ],
            dtype=torch.float64,
        ),
        "rgb_intrinsics": intrinsics(sequence.rgb_intrinsics),
        "event_intrinsics": intrinsics(sequence.event_intrinsics),
        "event_rotation": sequence.event_rotation,
        "event_translation": sequence.event_translation,
        "trajectory_times": sequence.trajectory.times,
        "trajectory_quats": sequence.trajectory.quats,
        "trajectory_centres": sequence.trajectory.centres,
        "events_x": sequence.events.x,
        "events_y": sequence.events.y,
        "events_t": sequence.events.t,
        "events_p": sequence.events.p,
        "surface_heights": sequence.surface.heights,
        "surface_bounds": torch.tensor(sequence.surface.bounds, dtype=torch.float64),
        "texture_bounds": torch.tensor(sequence.texture_bounds, dtype=torch.float64),
    }
    if sequence.gt_texture is not None:
        tensors["gt_albedo"] = sequence.gt_texture.albedo().detach()
        tensors["gt_texture_bounds"] = torch.tensor(sequence.gt_texture.bounds, dtype=torch.float64)
    for name in ("sharp_views", "depths"):
        if getattr(sequence, name) is not None:
            tensors[name] = getattr(sequence, name)
    return tensors


def sequence_from_tensors(tensors: dict[str, torch.Tensor], key: str | None = None) -> UAVSequence:
    """The flight that ``sequence_tensors`` stored."""

    def intrinsics(values: torch.Tensor) -> Intrinsics:
        fx, fy, cx, cy, width, height = values.tolist()
        return Intrinsics(fx, fy, cx, cy, int(width), int(height))

    trajectory = Trajectory.__new__(Trajectory)
    trajectory.times = tensors["trajectory_times"]
    trajectory.quats = tensors["trajectory_quats"]
    trajectory.centres = tensors["trajectory_centres"]
    exposure, offset, threshold = tensors["scalars"].tolist()
    gt_texture = None
    if "gt_albedo" in tensors:
        gt_texture = GroundTexture.from_image(
            tensors["gt_albedo"], tuple(tensors["gt_texture_bounds"].tolist())
        )
    return UAVSequence(
        frames=tensors["frames"],
        frame_times=tensors["frame_times"],
        exposure=exposure,
        rgb_intrinsics=intrinsics(tensors["rgb_intrinsics"]),
        event_intrinsics=intrinsics(tensors["event_intrinsics"]),
        event_rotation=tensors["event_rotation"],
        event_translation=tensors["event_translation"],
        trajectory=trajectory,
        events=Events(tensors["events_x"], tensors["events_y"], tensors["events_t"], tensors["events_p"]),
        surface=HeightField(tensors["surface_heights"], tuple(tensors["surface_bounds"].tolist())),
        texture_bounds=tuple(tensors["texture_bounds"].tolist()),
        time_offset=None if math.isnan(offset) else offset,
        event_threshold=threshold,
        gt_texture=gt_texture,
        sharp_views=tensors.get("sharp_views"),
        depths=tensors.get("depths"),
        key=key,
    )


def load_sequence(cfg: FlightConfig, cache: bool = True) -> UAVSequence:
    """The synthetic sequence of ``cfg``, read from ``$LITLAB_CACHE/events`` when simulated before.

    The clock offset only re-stamps the events, so a flight is simulated (and cached) once at offset 0
    and every ``time_offset`` of it is that flight re-stamped: equal to simulating it at that offset.
    """
    if not cache:
        sequence = synthesize_sequence(cfg)
        sequence.key = cfg.key()
        return sequence
    at_zero = replace(cfg, time_offset=0.0)
    tensors = cached_tensors(
        "events",
        "skyevents",
        GENERATOR_VERSION,
        {"flight": at_zero.key()},
        lambda: sequence_tensors(synthesize_sequence(at_zero)),
    )
    sequence = sequence_from_tensors(tensors, key=at_zero.key())
    if cfg.time_offset != 0.0:
        sequence = sequence.with_offset(cfg.time_offset)
        sequence.key = cfg.key()
    return sequence


def load_recording(root: str | Path, lidar_cell: float = 1.0, texel: float = 0.5) -> UAVSequence:
    """A real event/RGB/pose recording in the layout of the method README (``calib.json``, ``poses.csv``,
    ``rgb.npy``, ``rgb_times.txt``, ``events.npz``, optional ``lidar.npy``)."""
    root = Path(root)
    needed = ["calib.json", "poses.csv", "rgb.npy", "rgb_times.txt", "events.npz"]
    missing = [name for name in needed if not (root / name).exists()]
    if missing:
        raise LitlabError(
            f"{root} lacks {', '.join(missing)}; see 'Real recordings' in "
            "src/litlab/methods/skyevents/README.md"
        )
    calib = json.loads((root / "calib.json").read_text())
    poses = (
        torch.from_numpy(np.loadtxt(root / "poses.csv", delimiter=",", skiprows=1, ndmin=2))
        .float()
        .contiguous()
    )
    trajectory = Trajectory(poses[:, 0], quaternion_to_matrix(poses[:, 4:8]), poses[:, 1:4])
    frames = torch.from_numpy(np.load(root / "rgb.npy")).permute(0, 3, 1, 2).float() / 255
    frame_times = torch.from_numpy(np.loadtxt(root / "rgb_times.txt", ndmin=1)).float()
    if len(frame_times) != len(frames):
        raise LitlabError(f"rgb_times.txt has {len(frame_times)} times for {len(frames)} frames in rgb.npy")
    raw = np.load(root / "events.npz")
    t = torch.from_numpy(raw["t"].astype(np.float64))
    order = torch.argsort(t)
    p = torch.from_numpy(raw["p"].astype(np.int64))
    events = Events(
        torch.from_numpy(raw["x"].astype(np.int64))[order],
        torch.from_numpy(raw["y"].astype(np.int64))[order],
        t[order],
        torch.where(p > 0, 1, -1)[order],
    )
    margin = 100.0
    xy = trajectory.centres[:, :2]
    bounds = (
        float(xy[:, 0].min()) - margin,
        float(xy[:, 0].max()) + margin,
        float(xy[:, 1].min()) - margin,
        float(xy[:, 1].max()) + margin,
    )
    if (root / "lidar.npy").exists():
        surface = dem_from_points(torch.from_numpy(np.load(root / "lidar.npy")).float(), bounds, lidar_cell)
    else:
        surface = HeightField(torch.zeros(2, 2), bounds)
    extr = calib["event_in_rgb"]
    return UAVSequence(
        frames=frames,
        frame_times=frame_times,
        exposure=float(calib.get("exposure_s", 0.0)),
        rgb_intrinsics=Intrinsics(**calib["rgb"]),
        event_intrinsics=Intrinsics(**calib["event"]),
        event_rotation=torch.tensor(extr["rotation"], dtype=torch.float32),
        event_translation=torch.tensor(extr["translation"], dtype=torch.float32),
        trajectory=trajectory,
        events=events,
        surface=surface,
        texture_bounds=bounds,
        event_threshold=float(calib.get("event_threshold", 0.2)),
    )


class IndexDataset(torch.utils.data.Dataset):
    """Frame indices: a batch is the indices of frames; the module reads the sequence itself."""

    def __init__(self, indices: torch.Tensor) -> None:
        self.indices = indices

    def __len__(self) -> int:
        return len(self.indices)

    def __getitem__(self, i: int) -> torch.Tensor:
        return self.indices[i]


class UAVEventsDataModule(GlobalBatchDataModule):
    """One UAV flight (synthetic, or a recording at ``recording``); batches are RGB frame indices.

    Every ``holdout_every``-th frame is held out (alternately val and test); synthetic held-out frames
    are scored against sharp, well-lit ground-truth views. ``flight`` holds ``FlightConfig`` fields.
    """

    def __init__(
        self,
        flight: dict | None = None,
        recording: str | None = None,
        holdout_every: int = 4,
        batch_size: int = 8,
        cache: bool = True,
        num_workers: int = 0,
    ) -> None:
        super().__init__(batch_size, num_workers)
        self.flight = FlightConfig(
            **{k: tuple(v) if isinstance(v, list) else v for k, v in (flight or {}).items()}
        )
        self.recording = recording
        self.holdout_every = holdout_every
        self.cache = cache
        self.sequence: UAVSequence | None = None

    def setup(self, stage: str | None = None) -> None:
        if self.sequence is not None:
            return
        if self.recording is not None:
            self.sequence = load_recording(self.recording)
        else:
            self.sequence = load_sequence(self.flight, self.cache)
        k = torch.arange(len(self.sequence.frames))
        held = k % self.holdout_every == self.holdout_every // 2
        self.train_idx = k[~held]
        self.val_idx, self.test_idx = k[held][0::2], k[held][1::2]

    def _loader(self, indices: torch.Tensor, shuffle: bool) -> DataLoader:
        return DataLoader(
            IndexDataset(indices),
            batch_size=self.per_device_batch_size,
            shuffle=shuffle,
            num_workers=self.num_workers,
        )

    def train_dataloader(self) -> DataLoader:
        return self._loader(self.train_idx, shuffle=True)

    def val_dataloader(self) -> DataLoader:
        return self._loader(self.val_idx, shuffle=False)

    def test_dataloader(self) -> DataLoader:
        return self._loader(self.test_idx, shuffle=False)
