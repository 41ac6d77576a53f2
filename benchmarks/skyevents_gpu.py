"""SkyEvents' torch 3D Gaussian rasteriser (``litlab.kernels.gaussian_splatting``) on a GPU: ms per view.

The scene of ``skyevents_renderers.py``'s 20k-Gaussian case (0.3 m Gaussians over the ground a nadir
camera at 40 m sees, 53° horizontal field of view) drawn at the flight's 48×64 and at the EVK4 event
camera's 720×1280 (the paper's sensor; same horizontal field of view, so fewer Gaussians fall in the
shorter frame). Forward and forward + backward, median of CUDA-event timings after warm-up; the sparse
rasteriser's agreement with the dense reference at 48×64 is checked first. gsplat (the `splat` extra, the
CUDA rasteriser 3DGS users train with) is timed on the same scene and views when it imports (it compiles
its kernels on first use, which needs the CUDA toolkit); otherwise the JSON says why it was not.

Run:  python benchmarks/skyevents_gpu.py [--device cuda] [--gaussians 20000] [--out PATH]
Writes benchmarks/results/skyevents_gpu.json (or ``--out``).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import torch
from skyevents_renderers import synthetic_gaussians

from litlab.core.machine import machine_info
from litlab.datamodules.uav.geometry import Intrinsics, nadir_rotation
from litlab.kernels.gaussian_splatting import (
    Camera,
    covariance_3d,
    project,
    rasterize,
    rasterize_dense,
    render,
    render_with_gsplat,
    sh_colour,
)

RESULTS = Path(__file__).resolve().parent / "results"
GSPLAT_MISSING = "not run: needs a CUDA device and gsplat (pip install -e '.[splat]')"
SIZES = {"flight_48x64": (48, 64), "evk4_720x1280": (720, 1280)}


def device_ms(fn: Callable[[], object], device: torch.device, repeats: int) -> float:
    """Median ms of ``fn()`` after two warm-up calls: CUDA events on a GPU, wall time elsewhere."""

    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    for _ in range(2):
        fn()
    sync()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        sync()
        times.append(1e3 * (time.perf_counter() - start))
    return statistics.median(times)


def camera_of(height: int, width: int, device: torch.device) -> Camera:
    """The benchmark's nadir camera at 40 m with the flight's 53° horizontal field of view."""
    k = Intrinsics.from_fov(width, height, 53.0)
    rotation = nadir_rotation(torch.tensor(0.0)).to(device)
    return Camera(
        rotation, torch.tensor([0.0, 0.0, 40.0], device=device), k.fx, k.fy, k.cx, k.cy, width, height
    )


def agreement(scene: dict[str, torch.Tensor], camera: Camera) -> dict[str, float]:
    """Max abs difference of ``rasterize`` from the dense reference (rgb, opacity), 48×64 only."""
    with torch.no_grad():
        projected = project(scene["means"], covariance_3d(scene["quaternions"], scene["log_scales"]), camera)
        directions = torch.nn.functional.normalize(scene["means"] - camera.centre, dim=-1)
        colours, opacities = sh_colour(scene["sh"], directions), torch.sigmoid(scene["opacity_logits"])
        splatted = rasterize(projected, opacities, colours, camera.width, camera.height)
        dense = rasterize_dense(projected, opacities, colours, camera.width, camera.height)
    return {
        "rgb": (splatted[0] - dense[0]).abs().max().item(),
        "opacity": (splatted[2] - dense[2]).abs().max().item(),
    }


def render_ms(
    render_view: Callable[..., tuple[torch.Tensor, ...]],
    scene: dict[str, torch.Tensor],
    camera: Camera,
    repeats: int,
) -> dict[str, float]:
    """Forward and forward + backward ms of ``render_view(**scene, camera=camera)`` (its first output)."""
    device = scene["means"].device

    def forward() -> torch.Tensor:
        return render_view(**scene, camera=camera)[0]

    def backward() -> None:
        forward().sum().backward()
        for value in scene.values():
            value.grad = None

    with torch.no_grad():
        forward_ms = device_ms(forward, device, repeats)
    return {"forward_ms": forward_ms, "forward_backward_ms": device_ms(backward, device, repeats)}


def view_times(scene: dict[str, torch.Tensor], camera: Camera, repeats: int) -> dict[str, float]:
    """Forward and forward + backward ms of one view, the Gaussians in front of the image and peak memory."""
    device = scene["means"].device
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    row = render_ms(render, scene, camera, repeats)
    with torch.no_grad():
        projected = project(scene["means"], covariance_3d(scene["quaternions"], scene["log_scales"]), camera)
        size = torch.tensor([camera.width, camera.height], device=device)
        inside = ((projected.means >= 0) & (projected.means < size)).all(-1)
    row["gaussians_centred_in_image"] = int((inside & projected.visible).sum())
    if device.type == "cuda":
        row["peak_memory_gib"] = torch.cuda.max_memory_allocated(device) / 2**30
    return row


def gsplat_times(scene: dict[str, torch.Tensor], camera: Camera, repeats: int) -> dict[str, float]:
    """The same views through ``gsplat.rasterization``, and its largest RGB difference from ours."""
    row = render_ms(render_with_gsplat, scene, camera, repeats)
    with torch.no_grad():
        theirs = render_with_gsplat(**scene, camera=camera)[0]
        ours = render(**scene, camera=camera)[0]
    # α clamps differ (gsplat 0.999, 3DGS and litlab 0.99)
    row["max_rgb_difference_vs_litlab"] = (theirs - ours).abs().max().item()
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--gaussians", type=int, default=20_000)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--sizes", nargs="+", choices=list(SIZES), default=list(SIZES))
    parser.add_argument("--out", type=Path, default=RESULTS / "skyevents_gpu.json")
    args = parser.parse_args()
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise SystemExit("skyevents_gpu: no CUDA GPU here; --device cpu times the same renderer on the CPU")
    scene = {
        name: value.to(device).requires_grad_()
        for name, value in synthetic_gaussians(camera_of(48, 64, torch.device("cpu")), args.gaussians).items()
    }
    gsplat_ready = device.type == "cuda" and importlib.util.find_spec("gsplat") is not None
    result: dict = {
        "benchmark": "skyevents_gpu",
        "machine": machine_info(),
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else str(device),
        "torch": torch.__version__,
        "gaussians": args.gaussians,
        "timing": "median of CUDA-synchronised wall time per call after 2 warm-ups",
        "gsplat": {} if gsplat_ready else GSPLAT_MISSING,
        "rasterize_vs_dense_max_error_48x64": agreement(scene, camera_of(48, 64, device)),
        "views": {},
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    for name in args.sizes:
        result["views"][name] = view_times(scene, camera_of(*SIZES[name], device), args.repeats)
        print(name, result["views"][name], flush=True)
        if gsplat_ready:
            try:
                result["gsplat"][name] = gsplat_times(scene, camera_of(*SIZES[name], device), args.repeats)
            except Exception as error:  # noqa: BLE001 - gsplat builds its kernels on first use; record why it failed
                result["gsplat"][name] = f"not run: {type(error).__name__}: {error}"[:500]
            print("gsplat", name, result["gsplat"][name], flush=True)
        args.out.write_text(json.dumps(result | {"load_average": os.getloadavg()}, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
