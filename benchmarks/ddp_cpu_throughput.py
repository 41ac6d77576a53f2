"""Training throughput of ``trainer=ddp_cpu`` (2 gloo processes) against 1 process, same global batch.

Each contender is a real ``litlab-train`` run of the paper-size KAN ([2, 32, 32, 32, 1], G = 20) on the
function-fitting data, full batch (4000 points, so each DDP process takes 2000): 1 process on 1
thread, 2 DDP processes on 1 thread each, and, for reference, 1 process on 2 threads (intra-op
parallelism instead of data parallelism). A callback (this file's ``StepTimer``, loaded through
PYTHONPATH) times the steps after warm-up on rank 0, wall clock. The contenders take turns in every
repeat so machine load hits them alike; throughput is global samples per second from the median.

Run:  python benchmarks/ddp_cpu_throughput.py [--quick | --smoke]
Writes benchmarks/results/ddp_cpu_throughput.json (``--quick``: ddp_cpu_throughput_quick.json; ``--smoke``:
3 epochs of 2 steps, no 2-thread contender, ddp_cpu_throughput_smoke.json).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import lightning as L
import torch
from _smoke import SMOKE_HELP, suffix

from litlab.core.machine import cpu_model

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
WORKLOAD = [
    "experiment=kan/function_fit",
    "model.net.width=32",
    "model.net.depth=3",
    "model.net.grid_size=20",
    "data.n_samples=5000",
    "data.grid_resolution=20",
    "test=false",
    "optimized_metric=null",
    "callbacks.figures=null",
    "extras.print_config=false",
    "extras.write_run_record=false",
]
CONTENDERS = {
    "1_process_1_thread": ["trainer=cpu", "extras.torch_threads=1"],
    "2_processes_1_thread_each": ["trainer=ddp_cpu", "extras.torch_threads=1"],
    "1_process_2_threads": ["trainer=cpu", "extras.torch_threads=2"],
}
GLOBAL_BATCH = 4000


class StepTimer(L.Callback):
    """Write rank 0's wall-clock ms per step (after ``warmup`` epochs) to ``path`` as JSON."""

    def __init__(self, path: str, warmup: int) -> None:
        self.path, self.warmup = Path(path), warmup
        self.start, self.first_step = 0.0, 0

    def on_train_epoch_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if trainer.current_epoch == self.warmup:
            self.start, self.first_step = time.perf_counter(), trainer.global_step

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if trainer.is_global_zero:
            steps = trainer.global_step - self.first_step
            ms = 1000 * (time.perf_counter() - self.start) / steps
            timing = {"ms_per_step": ms, "steps": steps, "world_size": trainer.world_size}
            self.path.write_text(json.dumps(timing))


def run(contender: list[str], epochs: int, warmup: int, extra: tuple[str, ...] = ()) -> dict:
    """One litlab-train run in a fresh folder (``extra``: more overrides); rank 0's timing."""
    with tempfile.TemporaryDirectory() as folder:
        timing = Path(folder) / "timing.json"
        args = [
            *WORKLOAD,
            *extra,
            *contender,
            f"trainer.max_epochs={epochs}",
            f"trainer.check_val_every_n_epoch={epochs + 1}",
            "+callbacks.step_timer._target_=ddp_cpu_throughput.StepTimer",
            f"+callbacks.step_timer.path={timing}",
            f"+callbacks.step_timer.warmup={warmup}",
        ]
        env = {**os.environ, "PYTHONPATH": str(HERE), "WANDB_MODE": "disabled", "PYTHONWARNINGS": "ignore"}
        env.pop("LITLAB_RUN_ID", None)
        binary = Path(sys.executable).parent / "litlab-train"
        done = subprocess.run(
            [str(binary), *args], cwd=folder, env=env, capture_output=True, text=True, timeout=900
        )
        if done.returncode != 0:
            raise RuntimeError(f"litlab-train {' '.join(contender)} failed:\n{done.stderr[-3000:]}")
        return json.loads(timing.read_text())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer steps and one repeat")
    parser.add_argument("--smoke", action="store_true", help=SMOKE_HELP)
    args = parser.parse_args()
    epochs, warmup, repeats = (3, 1, 1) if args.smoke else (15, 3, 1) if args.quick else (45, 5, 3)
    contenders = dict(list(CONTENDERS.items())[:2]) if args.smoke else CONTENDERS  # 1 process, DDP
    load_before = os.getloadavg()[0]
    times: dict[str, list[float]] = {name: [] for name in contenders}
    world: dict[str, int] = {}
    for _ in range(repeats):
        for name, contender in contenders.items():
            result = run(contender, epochs, warmup, ("data.steps_per_epoch=2",) if args.smoke else ())
            times[name].append(result["ms_per_step"])
            world[name], steps_timed = result["world_size"], result["steps"]
    medians = {name: statistics.median(values) for name, values in times.items()}
    throughput = {name: GLOBAL_BATCH / (ms / 1000) for name, ms in medians.items()}
    single = throughput["1_process_1_thread"]
    payload = {
        "benchmark": "ddp_cpu_throughput",
        "quick": args.quick,
        "torch_version": torch.__version__,
        "lightning_version": L.__version__,
        "cpu_model": cpu_model(),
        "cpu_count": os.cpu_count(),
        "load_average_before_after": [load_before, os.getloadavg()[0]],
        "workload": WORKLOAD,
        "global_batch": GLOBAL_BATCH,
        "epochs_timed": epochs - warmup,
        "steps_timed": steps_timed,
        "repeats": repeats,
        "clock": "wall, rank 0",
        "contenders": {
            name: {
                "overrides": contenders[name],
                "world_size": world[name],
                "ms_per_step": {"median": medians[name], "all": times[name]},
                "samples_per_s": throughput[name],
                "speedup_vs_1_process_1_thread": throughput[name] / single,
            }
            for name in contenders
        },
    }
    for name, row in payload["contenders"].items():
        print(
            f"{name:28s} {row['ms_per_step']['median']:8.1f} ms/step  {row['samples_per_s']:9.0f} samples/s  "
            f"x{row['speedup_vs_1_process_1_thread']:.2f}",
            flush=True,
        )
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / f"ddp_cpu_throughput{suffix(args)}.json"
    out.write_text(json.dumps(payload, indent=2) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
