"""Start-up cost of the entry points: ``import litlab``, ``--help`` and a config error (issue: fast feedback).

Each command runs ``--repeats`` times as a child process; the JSON records the median CPU time (user +
system, what other jobs on a shared machine hardly change) and the median wall time, with the load.

Run:  python benchmarks/startup_time.py [--repeats 7]
Writes benchmarks/results/startup_time.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path

from litlab.core.machine import machine_info
from litlab.core.timing import child_cpu_seconds

RESULTS = Path(__file__).resolve().parent / "results"
BIN = Path(sys.executable).parent
COMMANDS = {
    "import litlab": ([sys.executable, "-c", "import litlab"], 0.3),
    "import litlab.train": ([sys.executable, "-c", "import litlab.train"], 1.5),
    "litlab-train --help": ([str(BIN / "litlab-train"), "--help"], 1.5),
    "litlab-run --help": ([str(BIN / "litlab-run"), "--help"], 1.5),
    "litlab-train trainer.max_epochs=abc (config error)": (
        [str(BIN / "litlab-train"), "trainer.max_epochs=abc"],
        1.5,
    ),
    "litlab-train model.net.widht=3 (unknown key)": ([str(BIN / "litlab-train"), "model.net.widht=3"], 1.5),
    "litlab-train model.net.width=8.5 (argument type; imports the model)": (
        [str(BIN / "litlab-train"), "model.net.width=8.5"],
        None,
    ),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    load_before = os.getloadavg()[0]
    rows = {}
    for name, (command, target) in COMMANDS.items():
        runs = [child_cpu_seconds(command, env) for _ in range(args.repeats)]
        cpu = statistics.median(run[0] for run in runs)
        rows[name] = {
            "cpu_s_median": round(cpu, 3),
            "wall_s_median": round(statistics.median(run[1] for run in runs), 3),
            "target_s": target,
            "meets_target": None if target is None else cpu <= target,
        }
        print(f"{name:70s} cpu {cpu:6.3f} s  (target {target})")
    payload = {
        "benchmark": "startup_time",
        "repeats": args.repeats,
        "load_average_before_after": [load_before, os.getloadavg()[0]],
        **machine_info(),
        "commands": rows,
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "startup_time.json").write_text(json.dumps(payload, indent=2) + "\n")


if __name__ == "__main__":
    main()
