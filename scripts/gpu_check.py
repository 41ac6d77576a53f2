"""GPU readiness in one run: training on one GPU (bf16), DDP on every visible GPU, FSDP, the Fitter on a GPU,
and each kernel in kernels/ compiled for real and compared with its torch reference; one JSON summary.

Run on a machine with a GPU (about 5 minutes on one H200; ``--quick``: shorter runs, about 2):
    bash scripts/gpu_check.sh
Writes <out>/gpu_check.json (default out: gpu_check/; rewritten after every step, so a run stopped by a
time limit leaves what it finished) and each run's folder under <out>/outputs/. ``--budget`` seconds bound
the whole check: each training run gets at most what is left after the kernel checks' share.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import gpu_kernels

SMALL = [
    "experiment=kan/function_fit",
    "data.n_samples=4000",
    "extras.print_config=false",
    "callbacks.figures=null",
]


def _run(args: list[str], out: Path, timeout: int) -> dict[str, Any]:
    """One ``python -m litlab.<app>`` run; its exit code, seconds, last lines and results.json's value."""
    start = time.perf_counter()
    try:
        result = subprocess.run(
            [sys.executable, "-m", *args, f"paths.log_dir={out / 'outputs'}"],
            capture_output=True,
            text=True,
            timeout=timeout,
            env={**os.environ, "WANDB_MODE": "disabled"},
        )
        code, tail = result.returncode, (result.stdout + result.stderr)[-1500:]
    except subprocess.TimeoutExpired:
        code, tail = -1, f"timed out after {timeout} s"
    record: dict[str, Any] = {
        "ok": code == 0,
        "exit_code": code,
        "seconds": round(time.perf_counter() - start, 1),
    }
    run_id = next((a.split("=", 1)[1] for a in args if a.startswith("run_id=")), None)
    found = list((out / "outputs").rglob(f"{run_id}/results.json")) if run_id else []
    if found:  # a finite value, or (a task without one) finite metrics
        results = json.loads(found[0].read_text())
        record["value"] = results.get("value")
        numbers = (
            [record["value"]] if record["value"] is not None else list(results.get("metrics", {}).values())
        )
        numbers = [x for x in numbers if isinstance(x, int | float)]
        record["ok"] = record["ok"] and bool(numbers) and all(math.isfinite(x) for x in numbers)
    if not record["ok"]:
        record["output_tail"] = tail
    return record


def _kernels() -> dict[str, Any]:
    """Each compiled kernel against its torch reference on the GPU (``gpu_kernels.CHECKS``)."""
    records: dict[str, Any] = {}
    for name, check in gpu_kernels.CHECKS.items():
        start = time.perf_counter()
        try:
            record = check("cuda")
            records[name] = {"ok": gpu_kernels.passed(record), **record}
        except Exception as error:  # a failing kernel is a finding of the check, not its end
            records[name] = {"ok": False, "error": f"{type(error).__name__}: {error}"}
        records[name]["seconds"] = round(time.perf_counter() - start, 1)
        print(f"kernel {name}: {'ok' if records[name]['ok'] else 'FAILED'}", flush=True)
    return records


def _write(summary: dict[str, Any], out: Path) -> None:
    """The summary so far, with ``all_ok`` over the steps and kernels done."""
    records = [v for v in summary.values() if isinstance(v, dict) and "ok" in v]
    records += list(summary.get("kernels", {}).values())
    summary["all_ok"] = bool(records) and all(record["ok"] for record in records)
    (out / "gpu_check.json").write_text(json.dumps(summary, indent=2) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("gpu_check"))
    parser.add_argument(
        "--quick", action="store_true", help="shorter training runs (about 2 minutes on an H200)"
    )
    parser.add_argument("--budget", type=float, default=900.0, help="seconds for the whole check")
    args = parser.parse_args()
    deadline = time.perf_counter() + args.budget
    args.out.mkdir(parents=True, exist_ok=True)
    import torch

    if not torch.cuda.is_available():
        raise SystemExit("gpu_check: no CUDA device is visible; run this on a GPU machine")
    n_gpus = torch.cuda.device_count()
    summary: dict[str, Any] = {
        "device": torch.cuda.get_device_name(0),
        "gpus": n_gpus,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "quick": args.quick,
    }
    epochs = (60, 40, 40) if args.quick else (500, 300, 200)
    task_epochs = ["task.epochs=100", "task.eval_epochs=[0,50,100]"] if args.quick else []
    steps = {
        "train_gpu_bf16": ["litlab.train", *SMALL, "trainer=gpu", "trainer.precision=bf16-mixed",
                           f"trainer.max_epochs={epochs[0]}", "run_id=gpu_bf16"],
        "train_ddp_all_gpus": ["litlab.train", *SMALL, "trainer=ddp", f"resources.devices={n_gpus}",
                               f"trainer.max_epochs={epochs[1]}", "run_id=ddp"],
        "train_fsdp": ["litlab.train", *SMALL, "trainer=fsdp", f"resources.devices={n_gpus}",
                       f"trainer.max_epochs={epochs[2]}", "run_id=fsdp"],
        "task_fitter_gpu": ["litlab.run", "task=kan/ntk", "trainer=gpu", *task_epochs, "run_id=fitter"],
    }  # fmt: skip
    kernel_share = 60.0  # seconds kept for the kernel checks (Triton compiles included)
    for name, command in steps.items():
        timeout = int(min(240.0, deadline - time.perf_counter() - kernel_share))
        if timeout < 10:
            summary[name] = {"ok": False, "exit_code": None, "seconds": 0.0, "output_tail": "no time left"}
        else:
            summary[name] = _run(command, args.out, timeout)
        print(
            f"{name}: {'ok' if summary[name]['ok'] else 'FAILED'} ({summary[name]['seconds']} s)", flush=True
        )
        _write(summary, args.out)
    summary["kernels"] = _kernels()
    _write(summary, args.out)
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
