"""SkyEvents' Gaussian projection and SH colour on a CPU against gsplat's pure-torch reference: ms per view.

gsplat's compositing is a CUDA kernel only (its torch rasteriser needs nerfacc's CUDA ops), so on a CPU
the peer is the part of gsplat that runs there: ``gsplat.cuda._torch_impl`` (what its CUDA kernels are
tested against). Both sides take the same 20k-Gaussian scene of ``skyevents_renderers.py`` and the
benchmark's nadir camera at 40 m (48×64 and 720×1280 frames): quaternion + log-scale → world covariance
→ EWA projection (means, conics, depths), and degree-1 SH colour, forward and forward + backward, median
CPU time after warm-up, one thread. Agreement on the visible Gaussians is checked before timing.

Run:  python benchmarks/skyevents_projection_peer.py [--gaussians 20000] [--repeats 25]
Writes benchmarks/results/skyevents_projection_peer.json (needs the `splat` extra for the peer; without
it the JSON says why and times ours alone).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
from collections.abc import Callable
from pathlib import Path

import torch
from skyevents_gpu import SIZES, camera_of
from skyevents_renderers import cpu_ms, synthetic_gaussians

from litlab.core.machine import machine_info
from litlab.kernels.gaussian_splatting import Camera, covariance_3d, gsplat_view, project, sh_colour

RESULTS = Path(__file__).resolve().parent / "results"
GSPLAT_MISSING = "not run: gsplat is the `splat` extra (pip install -e '.[splat]')"
Scene = dict[str, torch.Tensor]


def ours(scene: Scene, camera: Camera) -> tuple[torch.Tensor, ...]:
    """litlab: pixel means, conics, depths and colours of every Gaussian."""
    projected = project(scene["means"], covariance_3d(scene["quaternions"], scene["log_scales"]), camera)
    directions = torch.nn.functional.normalize(scene["means"] - camera.centre, dim=-1)
    return projected.means, projected.conics, projected.depths, sh_colour(scene["sh"], directions)


def theirs(scene: Scene, camera: Camera) -> tuple[torch.Tensor, ...]:
    """gsplat's torch reference of the same quantities (means in its half-integer pixel convention), then
    its radii (zero for the Gaussians it drops)."""
    from gsplat.cuda import _torch_impl

    covariances, _ = _torch_impl._quat_scale_to_covar_preci(
        scene["quaternions"], scene["log_scales"].exp(), compute_preci=False
    )
    viewmat, intrinsics = gsplat_view(camera)
    radii, means, depths, conics, _ = _torch_impl._fully_fused_projection(
        scene["means"], covariances, viewmat[None], intrinsics[None], camera.width, camera.height
    )
    directions = torch.nn.functional.normalize(scene["means"] - camera.centre, dim=-1)
    colours = (_torch_impl._spherical_harmonics(1, directions, scene["sh"]) + 0.5).clamp_min(0.0)
    return means[0], conics[0], depths[0], colours, radii[0]


def agreement(scene: Scene, camera: Camera) -> dict[str, float]:
    """Largest absolute differences on the Gaussians both sides keep (gsplat drops off-screen ones)."""
    with torch.no_grad():
        mine, (*peer, radii) = ours(scene, camera), theirs(scene, camera)
    kept = (radii > 0).all(-1)
    names = ("means_px", "conics", "depths", "colours")
    row = {
        f"max_abs_{n}": (a[kept] + (0.5 if n == "means_px" else 0.0) - b[kept]).abs().max().item()
        for n, a, b in zip(names, mine, peer, strict=True)
    }
    return row | {"gaussians_compared": int(kept.sum())}


def times(
    compute: Callable[[Scene, Camera], tuple[torch.Tensor, ...]], scene: Scene, camera: Camera, repeats: int
) -> dict[str, float]:
    """Forward and forward + backward CPU ms of ``compute(scene, camera)``."""

    def backward() -> None:
        sum(t.sum() for t in compute(scene, camera)).backward()
        for value in scene.values():
            value.grad = None

    with torch.no_grad():
        forward = cpu_ms(lambda: compute(scene, camera), repeats)
    return {"forward_ms": forward, "forward_backward_ms": cpu_ms(backward, repeats)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gaussians", type=int, default=20000)
    parser.add_argument("--repeats", type=int, default=25)
    parser.add_argument("--out", type=Path, default=RESULTS / "skyevents_projection_peer.json")
    args = parser.parse_args()
    torch.set_num_threads(1)
    has_peer = importlib.util.find_spec("gsplat") is not None
    results: dict = {"benchmark": "skyevents_projection_peer", "machine": machine_info(), "threads": 1}
    results |= {"gaussians": args.gaussians, "sh_degree": 1, "peer": "gsplat.cuda._torch_impl"}
    for name, (height, width) in SIZES.items():
        camera = camera_of(height, width, torch.device("cpu"))
        scene = {k: v.requires_grad_() for k, v in synthetic_gaussians(camera, args.gaussians).items()}
        row: dict = {"litlab": times(ours, scene, camera, args.repeats)}
        if has_peer:
            row["agreement"] = agreement(scene, camera)
            row["gsplat_torch"] = times(theirs, scene, camera, args.repeats)
            row["gsplat_over_litlab"] = {
                k: row["gsplat_torch"][k] / row["litlab"][k] for k in ("forward_ms", "forward_backward_ms")
            }
        else:
            row["gsplat_torch"] = GSPLAT_MISSING
        results[name] = row
        print(name, json.dumps(row), flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
