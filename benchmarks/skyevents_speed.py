"""SkyEvents speed on a CPU: render time per view, training iterations per second per setup, GTA time.

Run:  python benchmarks/skyevents_speed.py [--threads 1] [--steps 30]
Writes benchmarks/results/skyevents_speed.json. Uses the CPU-default synthetic flight (blur condition,
48×64 RGB, 32×48 events); the median over repeats is reported.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import torch

from litlab.core.machine import cpu_model
from litlab.datamodules.events import FlightConfig, load_sequence
from litlab.datamodules.uav.render import render
from litlab.methods.skyevents.gta import estimate_offset_gta
from litlab.methods.skyevents.objective import EventReconstruction
from litlab.methods.skyevents.study import held_out

RESULTS = Path(__file__).resolve().parent / "results"


def median_time(fn, repeats: int) -> float:
    """Median wall time (s) of ``fn()`` over ``repeats`` calls after one warm-up."""
    fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--steps", type=int, default=30)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    sequence = load_sequence(FlightConfig(condition="blur", time_offset=0.01))
    train, _ = held_out(sequence)
    results: dict = {
        "cpu": cpu_model(),
        "threads": args.threads,
        "rgb_size": [sequence.rgb_intrinsics.height, sequence.rgb_intrinsics.width],
        "event_size": [sequence.event_intrinsics.height, sequence.event_intrinsics.width],
    }
    objective = EventReconstruction(event_loss="rer")
    objective.build(sequence, 0.01)
    rotation, centre = sequence.rgb_pose(sequence.frame_times[:1])
    with torch.no_grad():
        results["render_ms_per_view"] = 1e3 * median_time(
            lambda: render(objective.texture, sequence.surface, sequence.rgb_intrinsics, rotation, centre), 50
        )
    for loss in ("none", "full", "rer"):
        objective = EventReconstruction(event_loss=loss)
        objective.build(sequence, 0.01)
        optimizer = torch.optim.Adam(objective.parameters(), lr=0.1)
        generator = torch.Generator().manual_seed(0)

        def step(objective=objective, optimizer=optimizer, generator=generator) -> None:
            batch = train[torch.randperm(len(train), generator=generator)[:8]]
            optimizer.zero_grad()
            objective.losses(sequence, batch)["total"].backward()
            optimizer.step()

        results[f"train_it_per_s/{loss}"] = 1.0 / median_time(step, args.steps)
    start = time.perf_counter()
    estimate_offset_gta(sequence)
    results["gta_s"] = time.perf_counter() - start
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "skyevents_speed.json").write_text(json.dumps(results, indent=2))
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
