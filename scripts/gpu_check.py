"""GPU readiness in one run: training on one GPU (bf16), DDP on every visible GPU, FSDP, the Fitter on a GPU,
and each kernel in kernels/ compiled for real and compared with its torch reference; one JSON summary.

Run on a machine with a GPU (about 5 minutes on one H200):  bash scripts/gpu_check.sh
Writes <out>/gpu_check.json (default out: gpu_check/) and each run's folder under <out>/outputs/.
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import os
import pkgutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

SMALL = [
    "experiment=kan/function_fit",
    "data.n_samples=4000",
    "extras.print_config=false",
    "callbacks.figures=null",
]


def _run(args: list[str], out: Path, timeout: int) -> dict[str, Any]:
    """One ``python -m litlab.<app>`` run; its exit code, seconds, last lines and results.json."""
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
    if found:
        results = json.loads(found[0].read_text())
        record["value"] = results.get("value")
        record["ok"] = record["ok"] and results.get("value") is not None and math.isfinite(results["value"])
    if not record["ok"]:
        record["output_tail"] = tail
    return record


def _kernels() -> dict[str, Any]:
    """Each ``litlab.kernels`` module's ``check_against_reference(device)`` (compiled kernel vs torch)."""
    import litlab.kernels as kernels

    records: dict[str, Any] = {}
    for info in pkgutil.iter_modules(kernels.__path__):
        module = importlib.import_module(f"litlab.kernels.{info.name}")
        check = getattr(module, "check_against_reference", None)
        if check is None:
            continue
        start = time.perf_counter()
        try:
            errors = check("cuda")
            records[info.name] = {
                "ok": True,
                "max_abs_error": errors,
                "seconds": round(time.perf_counter() - start, 1),
            }
        except Exception as error:  # a failing kernel is a finding of the check, not its end
            records[info.name] = {"ok": False, "error": f"{type(error).__name__}: {error}"}
    return records


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("gpu_check"))
    args = parser.parse_args()
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
    }
    steps = {
        "train_gpu_bf16": (["litlab.train", *SMALL, "trainer=gpu", "trainer.precision=bf16-mixed",
                            "trainer.max_epochs=500", "run_id=gpu_bf16"], 240),
        "train_ddp_all_gpus": (["litlab.train", *SMALL, "trainer=ddp", f"resources.devices={n_gpus}",
                                "trainer.max_epochs=300", "run_id=ddp"], 240),
        "train_fsdp": (["litlab.train", *SMALL, "trainer=fsdp", f"resources.devices={n_gpus}",
                        "trainer.max_epochs=200", "run_id=fsdp"], 240),
        "task_fitter_gpu": (["litlab.run", "task=kan/ntk", "trainer=gpu", "run_id=fitter"], 240),
    }  # fmt: skip
    for name, (command, timeout) in steps.items():
        summary[name] = _run(command, args.out, timeout)
        print(
            f"{name}: {'ok' if summary[name]['ok'] else 'FAILED'} ({summary[name]['seconds']} s)", flush=True
        )
    summary["kernels"] = _kernels()
    summary["all_ok"] = all(v["ok"] for k, v in summary.items() if isinstance(v, dict) and "ok" in v) and all(
        v["ok"] for v in summary["kernels"].values()
    )
    (args.out / "gpu_check.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
