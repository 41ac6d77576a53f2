"""Seconds and peak memory of one AWM comparison of two ~100M-parameter Llama checkpoints on a CPU, beside
the PCS baseline (flattened cosine) on the same pair.

Two models are built locally from a config (d=768, 12 layers, 12 heads, SwiGLU 2048, 32k vocabulary: 110M
parameters, random weights — timing does not depend on training), the second a residual-permuted,
sign-flipped copy of the first, saved as safetensors with a 32k-token tokenizer.json. Each comparison runs
in its own child process reading the two folders (as a user's would); its peak memory is the child's VmHWM
(the high-water RSS, which includes the safetensors pages it touched). Wall and CPU seconds are both
reported: on a shared machine the CPU seconds are the figure to compare.
The paper's target: under 30 s per pair (7B models, RTX 3090).

Run:  python benchmarks/fingerprint_pair_speed.py [--quick]
Writes benchmarks/results/fingerprint_pair_speed.json (``--quick``: a d=256 model, ..._quick.json).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _smoke import SMOKE_HELP, suffix

RESULTS = Path(__file__).resolve().parent / "results"
CHILD = """
import json, sys, time, torch
torch.set_num_threads(int(sys.argv[4]))
from litlab.methods.fingerprint.baselines import pcs
from litlab.methods.fingerprint.score import awm_score
start, cpu = time.perf_counter(), time.process_time()  # imports excluded: paid once per session
if sys.argv[1] == "awm":
    value = awm_score(sys.argv[2], sys.argv[3]).score
else:
    value = pcs(sys.argv[2], sys.argv[3])
seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
status = dict(line.split(":", 1) for line in open("/proc/self/status") if ":" in line)
peak = int(status["VmHWM"].split()[0]) / 1024  # own high-water RSS (ru_maxrss keeps the parent's)
print(json.dumps({"score": value, "seconds": seconds, "cpu_seconds": cpu, "peak_rss_mib": peak}))
"""


def build_pair(
    folder: Path, hidden: int, layers: int, heads: int, ffn: int, vocab: int
) -> tuple[Path, Path, int]:
    """Save a random Llama and its permuted copy (with a shared tokenizer.json); returns paths and size."""
    import torch

    from litlab.lm import build_lm, llama_config
    from litlab.methods.fingerprint import derive

    torch.manual_seed(0)
    model = build_lm(llama_config(vocab, hidden, layers, heads, intermediate_size=ffn))
    n_params = sum(p.numel() for p in model.parameters())
    copy, _, _ = derive.permute_hidden(model, torch.Generator().manual_seed(1))
    tokenizer = json.dumps({"model": {"vocab": {f"tok{i}": i for i in range(vocab)}}, "added_tokens": []})
    paths = []
    for name, m in (("base", model), ("permuted", copy)):
        m.save_pretrained(folder / name)
        (folder / name / "tokenizer.json").write_text(tokenizer)
        paths.append(folder / name)
    return paths[0], paths[1], n_params


def measure(method: str, first: Path, second: Path, threads: int) -> dict[str, float]:
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    out = subprocess.run(
        [sys.executable, "-c", CHILD, method, str(first), str(second), str(threads)],
        capture_output=True, text=True, env=env, check=True,
    )  # fmt: skip
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="a d=256, 4-layer model (seconds)")
    parser.add_argument("--smoke", action="store_true", help=SMOKE_HELP)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    from litlab.core.machine import machine_info

    shape = (256, 4, 4, 688, 8000) if args.quick else (768, 12, 12, 2048, 32000)
    shape = (64, 2, 2, 128, 1000) if args.smoke else shape
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        first, second, n_params = build_pair(Path(tmp), *shape)
        build_seconds = time.perf_counter() - start
        runs = {
            m: [measure(m, first, second, args.threads) for _ in range(args.repeats)] for m in ("awm", "pcs")
        }
    best = {m: min(r, key=lambda x: x["seconds"]) for m, r in runs.items()}
    result = {
        "benchmark": "fingerprint_pair_speed",
        "model": dict(zip(("hidden", "layers", "heads", "ffn", "vocab"), shape), parameters=n_params),
        "threads": args.threads,
        "load_average": os.getloadavg(),
        "build_seconds": build_seconds,
        "seconds_per_pair": {m: b["seconds"] for m, b in best.items()},
        "cpu_seconds_per_pair": {m: b["cpu_seconds"] for m, b in best.items()},
        "peak_rss_mib": {m: b["peak_rss_mib"] for m, b in best.items()},
        "scores": {m: b["score"] for m, b in best.items()},
        "all_runs": runs,
        "target_seconds": 30.0,
        "machine": machine_info(),
    }
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"fingerprint_pair_speed{suffix(args)}.json"
    path.write_text(json.dumps(result, indent=2) + "\n")
    keys = ("model", "seconds_per_pair", "cpu_seconds_per_pair", "peak_rss_mib", "scores", "load_average")
    print(json.dumps({k: result[k] for k in keys}, indent=2))


if __name__ == "__main__":
    main()
