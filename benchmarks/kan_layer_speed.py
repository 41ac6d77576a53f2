"""Forward+backward time of litlab's KANLayer against pykan's KANLayer and an MLP with as many parameters.

Each step is: zero the gradients, y = layer(x), loss = mean(y²), loss.backward(), with x requiring grad (as
for any layer after the first). The contenders run in turn within every repeat, so a load change on a
shared machine hits all of them alike; the reported time is the median over repeats (wall clock, and the
thread's CPU time beside it). Also timed: litlab's layer forced onto the Cox–de Boor path (the basis before
the closed form), and a full-batch Adam step of a [2, 8, 1] G = 5 KAN on 4000 points, both paths.

Run:  python benchmarks/kan_layer_speed.py [--quick] [--threads 1]
Needs pykan (benchmark-only):  pip install -e '.[bench]'   (pykan==0.2.8)
Writes benchmarks/results/kan_layer_speed.json (``--quick``: kan_layer_speed_quick.json) and prints a table.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from collections.abc import Callable
from importlib import metadata
from pathlib import Path

import torch
from torch import Tensor, nn

from litlab.core.machine import cpu_model
from litlab.methods.kan.layers import KAN, KANLayer

RESULTS = Path(__file__).resolve().parent / "results"
SPLINE_ORDER = 3
TARGET_PYKAN_SPEEDUP = 10.0
TARGET_MLP_SLOWDOWN = 3.0


def n_parameters(module: nn.Module) -> int:
    """Trainable parameters (pykan keeps its grid and mask as frozen Parameters)."""
    return sum(p.numel() for p in module.parameters() if p.requires_grad)


def matched_mlp(n_in: int, n_out: int, n_params: int) -> nn.Sequential:
    """Linear(n_in, H) → SiLU → Linear(H, n_out), H chosen so the parameter count is closest to n_params."""
    hidden = max(1, round((n_params - n_out) / (n_in + n_out + 1)))
    return nn.Sequential(nn.Linear(n_in, hidden), nn.SiLU(), nn.Linear(hidden, n_out))


def forced_cox_de_boor(layer: KANLayer) -> KANLayer:
    """The same layer with the closed-form basis switched off (the instance never sees uniform knots)."""
    layer.uniform_knot_map = lambda: None
    return layer


def layer_step(module: nn.Module, x: Tensor, first_output: bool = False) -> Callable[[], None]:
    """One forward+backward of mean(y²); pykan returns (y, preacts, postacts, postspline)."""

    def step() -> None:
        module.zero_grad(set_to_none=True)
        x.grad = None
        y = module(x)
        (y[0] if first_output else y).square().mean().backward()

    return step


def time_interleaved(steps: dict[str, Callable[[], None]], repeats: int, warmup: int) -> dict[str, dict]:
    """Median (and min) wall and thread-CPU milliseconds per step, the steps taking turns in each repeat."""
    for _ in range(warmup):
        for step in steps.values():
            step()
    wall: dict[str, list[float]] = {name: [] for name in steps}
    cpu: dict[str, list[float]] = {name: [] for name in steps}
    for _ in range(repeats):
        for name, step in steps.items():
            start_wall, start_cpu = time.perf_counter(), time.thread_time()
            step()
            cpu[name].append((time.thread_time() - start_cpu) * 1e3)
            wall[name].append((time.perf_counter() - start_wall) * 1e3)
    return {
        name: {
            "median_ms": statistics.median(wall[name]),
            "min_ms": min(wall[name]),
            "cpu_median_ms": statistics.median(cpu[name]),
        }
        for name in steps
    }


def bench_size(
    pykan_layer_cls: type, n_in: int, n_out: int, grid_size: int, batch: int, repeats: int, warmup: int
) -> dict:
    """Time the four contenders on one (n_in, n_out, G) and return sizes, times and ratios."""
    torch.manual_seed(0)
    litlab = KANLayer(n_in, n_out, grid_size, SPLINE_ORDER, backend="torch")
    cox_de_boor = forced_cox_de_boor(KANLayer(n_in, n_out, grid_size, SPLINE_ORDER, backend="torch"))
    pykan = pykan_layer_cls(in_dim=n_in, out_dim=n_out, num=grid_size, k=SPLINE_ORDER, device="cpu")
    mlp = matched_mlp(n_in, n_out, n_parameters(litlab))
    x = (torch.rand(batch, n_in) * 2 - 1).requires_grad_()
    times = time_interleaved(
        {
            "litlab": layer_step(litlab, x),
            "litlab_cox_de_boor": layer_step(cox_de_boor, x),
            "pykan": layer_step(pykan, x, first_output=True),
            "mlp": layer_step(mlp, x),
        },
        repeats,
        warmup,
    )
    median = {name: t["median_ms"] for name, t in times.items()}
    cpu = {name: t["cpu_median_ms"] for name, t in times.items()}
    return {
        "n_in": n_in,
        "n_out": n_out,
        "grid_size": grid_size,
        "spline_order": SPLINE_ORDER,
        "batch": batch,
        "params": {"litlab": n_parameters(litlab), "pykan": n_parameters(pykan), "mlp": n_parameters(mlp)},
        "mlp_hidden": mlp[0].out_features,
        "times": times,
        "ratios": {
            "pykan_over_litlab": median["pykan"] / median["litlab"],
            "litlab_over_mlp": median["litlab"] / median["mlp"],
            "cox_de_boor_over_litlab": median["litlab_cox_de_boor"] / median["litlab"],
        },
        "ratios_cpu_time": {
            "pykan_over_litlab": cpu["pykan"] / cpu["litlab"],
            "litlab_over_mlp": cpu["litlab"] / cpu["mlp"],
            "cox_de_boor_over_litlab": cpu["litlab_cox_de_boor"] / cpu["litlab"],
        },
    }


def bench_training_step(n_points: int, repeats: int, warmup: int) -> dict:
    """Full-batch Adam step (forward, MSE, backward, update) of a [2, 8, 1] G = 5 KAN, both basis paths."""
    generator = torch.Generator().manual_seed(0)
    x = torch.rand(n_points, 2, generator=generator) * 2 - 1
    target = torch.sin(torch.pi * x[:, :1]) * torch.cos(torch.pi * x[:, 1:])
    steps = {}
    for name, closed_form in (("litlab", True), ("litlab_cox_de_boor", False)):
        torch.manual_seed(0)
        model = KAN([2, 8, 1], grid_size=5, spline_order=SPLINE_ORDER, backend="torch")
        if not closed_form:
            for layer in model.layers:
                forced_cox_de_boor(layer)
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)

        def step(model: KAN = model, optimizer: torch.optim.Optimizer = optimizer) -> None:
            optimizer.zero_grad(set_to_none=True)
            nn.functional.mse_loss(model(x), target).backward()
            optimizer.step()

        steps[name] = step
    times = time_interleaved(steps, repeats, warmup)
    return {
        "widths": [2, 8, 1],
        "grid_size": 5,
        "n_points": n_points,
        "times": times,
        "speedup": times["litlab_cox_de_boor"]["median_ms"] / times["litlab"]["median_ms"],
    }


def print_table(sizes: list[dict], training: dict, threads: int) -> None:
    """A small text table of the medians and ratios."""
    print(f"KAN layer forward+backward, batch {sizes[0]['batch']}, {threads} thread(s), median wall ms")
    print("ratios: from wall medians (from thread-CPU medians in brackets)")
    header = (
        f"{'n_in':>4} {'n_out':>5} {'G':>3} | {'litlab':>8} {'cox-de-boor':>11} {'pykan':>9} "
        f"{'mlp (H)':>14} | {'pykan/litlab':>13} {'litlab/mlp':>12}"
    )
    print(header)
    print("-" * len(header))
    for row in sizes:
        t = {name: v["median_ms"] for name, v in row["times"].items()}
        mlp = f"{t['mlp']:.2f} ({row['mlp_hidden']})"
        wall, cpu = row["ratios"], row["ratios_cpu_time"]
        pykan = f"{wall['pykan_over_litlab']:.1f} ({cpu['pykan_over_litlab']:.1f})"
        over_mlp = f"{wall['litlab_over_mlp']:.2f} ({cpu['litlab_over_mlp']:.2f})"
        print(
            f"{row['n_in']:>4} {row['n_out']:>5} {row['grid_size']:>3} | {t['litlab']:>8.2f} "
            f"{t['litlab_cox_de_boor']:>11.2f} {t['pykan']:>9.2f} {mlp:>14} | {pykan:>13} {over_mlp:>12}"
        )
    t = training["times"]
    print(
        f"[2, 8, 1] G=5 Adam step on {training['n_points']} points: {t['litlab']['median_ms']:.2f} ms "
        f"(Cox–de Boor path {t['litlab_cox_de_boor']['median_ms']:.2f} ms, {training['speedup']:.1f}x)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--quick", action="store_true", help="fewer sizes and repeats (under a minute)")
    parser.add_argument("--threads", type=int, default=1, help="torch.set_num_threads (default 1)")
    parser.add_argument("--batch", type=int, default=4096)
    parser.add_argument("--repeats", type=int, default=None, help="timed repeats (default 21, quick 9)")
    parser.add_argument("--output", type=Path, default=None, help="JSON path (default benchmarks/results/)")
    args = parser.parse_args()
    try:
        from kan.KANLayer import KANLayer as PykanLayer
    except ImportError as error:
        message = f"pykan is needed: pip install -e '.[bench]' (pykan==0.2.8); import failed: {error}"
        raise SystemExit(message) from error

    torch.set_num_threads(args.threads)
    repeats = args.repeats or (9 if args.quick else 21)
    warmup = 1 if args.quick else 3
    shapes = [(2, 8), (32, 32)] if args.quick else [(2, 8), (32, 32), (64, 64)]
    load_before = os.getloadavg()
    sizes = [
        bench_size(PykanLayer, n_in, n_out, grid_size, args.batch, repeats, warmup)
        for n_in, n_out in shapes
        for grid_size in (5, 20)
    ]
    training = bench_training_step(4000, repeats * 4, warmup * 4)
    result = {
        "benchmark": "kan_layer_speed",
        "quick": args.quick,
        "torch_version": torch.__version__,
        "pykan_version": metadata.version("pykan"),
        "python_version": platform.python_version(),
        "threads": torch.get_num_threads(),
        "cpu_model": cpu_model(),
        "cpu_count": os.cpu_count(),
        "load_average_before_after": [load_before[0], os.getloadavg()[0]],
        "allocator_env": {
            k: v for k, v in os.environ.items() if k.startswith("MALLOC_") or k == "LD_PRELOAD"
        },
        "repeats": repeats,
        "warmup": warmup,
        "step": "zero_grad; y = layer(x); mean(y**2).backward(); x (batch, n_in) requires grad",
        "sizes": sizes,
        "training_step": training,
        "targets": {
            "pykan_over_litlab_at_least": TARGET_PYKAN_SPEEDUP,
            "litlab_over_mlp_at_most": TARGET_MLP_SLOWDOWN,
        },
        "targets_met": {
            clock: {
                "pykan": all(row[key]["pykan_over_litlab"] >= TARGET_PYKAN_SPEEDUP for row in sizes),
                "mlp": all(row[key]["litlab_over_mlp"] <= TARGET_MLP_SLOWDOWN for row in sizes),
            }
            for clock, key in (("wall", "ratios"), ("cpu_time", "ratios_cpu_time"))
        },
    }
    output = args.output or RESULTS / ("kan_layer_speed_quick.json" if args.quick else "kan_layer_speed.json")
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(result, indent=2) + "\n")
    print_table(sizes, training, result["threads"])
    print(f"targets met: {result['targets_met']}; wrote {output}")


if __name__ == "__main__":
    main()
