"""The two SkyEvents renderers on a CPU: ms per 48×64 view (forward, forward + backward) and a short fit.

Texture on the LiDAR DEM vs 3D Gaussians (``litlab.kernels.gaussian_splatting``): per-view time of the
flight's own scenes (the texture; Gaussians on the DEM every ``--spacing`` m) and of 20k Gaussians in
view (the issue's target: ≤ 20 ms), then ``--steps`` RGB-only training steps of each on the nadir
``normal`` flight with the held-out PSNR reached and the CPU seconds taken, and last the 20k view again
with glibc keeping freed memory (``litlab.core.machine.keep_freed_memory``, what litlab-train and
litlab-run set by default). CPU (process) time, one thread.

Run:  python benchmarks/skyevents_renderers.py [--steps 60] [--spacing 2.5] [--smoke]
Writes benchmarks/results/skyevents_renderers[_smoke].json (``--smoke``: one step, Gaussians every 10 m,
1k in view).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import torch
from _smoke import SMOKE_HELP, suffix

from litlab.core.machine import keep_freed_memory, machine_info
from litlab.datamodules.events import FlightConfig, load_sequence
from litlab.datamodules.uav.geometry import nadir_rotation
from litlab.fitting import Fitter
from litlab.kernels.gaussian_splatting import Camera, render
from litlab.methods.skyevents.fitting import fit
from litlab.methods.skyevents.objective import EventReconstruction
from litlab.methods.skyevents.study import held_out

RESULTS = Path(__file__).resolve().parent / "results"


def cpu_ms(fn: Callable[[], object], repeats: int = 7) -> float:
    """Median CPU milliseconds of ``fn()`` after one warm-up."""
    fn()
    times = []
    for _ in range(repeats):
        start = time.process_time()
        fn()
        times.append(1e3 * (time.process_time() - start))
    return statistics.median(times)


def view_times(draw: Callable[[], torch.Tensor], parameters: list[torch.Tensor]) -> dict[str, float]:
    """Forward and forward + backward ms of one view."""

    def backward() -> None:
        draw().sum().backward()
        for p in parameters:
            p.grad = None

    with torch.no_grad():
        forward = cpu_ms(draw)
    return {"forward_ms": forward, "forward_backward_ms": cpu_ms(backward)}


def synthetic_gaussians(camera: Camera, n: int, seed: int = 0) -> dict[str, torch.Tensor]:
    """``n`` Gaussians of 0.3 m scattered over the ground a nadir ``camera`` at 40 m sees."""
    g = torch.Generator().manual_seed(seed)
    ground = torch.rand(n, 2, generator=g) * torch.tensor([46.0, 35.0]) - torch.tensor([23.0, 17.5])
    return {
        "means": torch.cat([ground + camera.centre[:2], torch.rand(n, 1, generator=g) * 2], 1),
        "quaternions": torch.randn(n, 4, generator=g),
        "log_scales": torch.full((n, 3), math.log(0.3)),
        "opacity_logits": torch.zeros(n),
        "sh": 0.2 * torch.randn(n, 4, 3, generator=g),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--spacing", type=float, default=2.5)
    parser.add_argument("--smoke", action="store_true", help=SMOKE_HELP)
    args = parser.parse_args()
    if args.smoke:
        args.steps, args.spacing = 1, 10.0
    n_view = 1_000 if args.smoke else 20_000
    torch.set_num_threads(1)
    os.environ.setdefault("WANDB_MODE", "disabled")
    sequence = load_sequence(FlightConfig(seed=5, condition="normal", duration=0.4, time_offset=0.007))
    k = sequence.rgb_intrinsics
    rotation, centre = sequence.rgb_pose(sequence.frame_times[:1])
    results: dict = {
        "benchmark": "skyevents_renderers",
        "machine": machine_info(),
        "image": [k.height, k.width],
    }
    scenes = {}
    for renderer in ("texture", "gaussians"):
        objective = EventReconstruction(event_loss="none", renderer=renderer, splat_spacing=args.spacing)
        objective.build(sequence, 0.007)
        scenes[renderer] = objective
        results[f"{renderer}_view"] = view_times(
            lambda o=objective: o.scene(k, rotation, centre), list(objective.parameters())
        )
    results["gaussians_view"]["count"] = len(scenes["gaussians"].scene.gaussians)
    nadir = nadir_rotation(torch.tensor(0.0))
    camera = Camera(nadir, torch.tensor([0, 0, 40.0]), k.fx, k.fy, k.cx, k.cy, k.width, k.height)
    scene = {name: value.requires_grad_() for name, value in synthetic_gaussians(camera, n_view).items()}

    def draw_20k() -> torch.Tensor:
        return render(**scene, camera=camera)[0]

    results["gaussians_20k_view"] = {**view_times(draw_20k, list(scene.values())), "target_forward_ms": 20.0}
    train, test = held_out(sequence)
    for renderer, objective in scenes.items():
        before = float(objective.evaluate(sequence, test)["psnr"])
        start = time.process_time()
        fit(Fitter(), objective, sequence, train, steps=args.steps, batch_size=4)
        results[f"{renderer}_fit"] = {
            "steps": args.steps,
            "psnr_before": before,
            "psnr_after": float(objective.evaluate(sequence, test)["psnr"]),
            "cpu_s": time.process_time() - start,
        }
        print(renderer, results[f"{renderer}_view"], results[f"{renderer}_fit"], flush=True)
    if keep_freed_memory(64):  # the 20k view again, the allocator no longer returning freed buffers to the OS
        results["gaussians_20k_view_freed_memory_kept"] = view_times(draw_20k, list(scene.values()))
    results["load_average_at_end"] = list(os.getloadavg())
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / f"skyevents_renderers{suffix(args)}.json"
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(
        json.dumps(results["gaussians_20k_view"]),
        json.dumps(results.get("gaussians_20k_view_freed_memory_kept")),
    )
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
