"""Every speed benchmark in benchmarks/ runs at its smoke size and writes its JSON.

Nothing imports the benchmark scripts, so a renamed function or a changed signature would break one
silently until someone reran it for a paper. Each runs as a user runs it (``python benchmarks/<name>.py``),
in a copy of the folder so that the committed results are never touched. Where a machine lacks what one
needs (a CUDA GPU; pykan, the ``bench`` extra, which ``dev`` includes), it must stop with one clear line.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

import pytest
import torch

from tests.conftest import run_cli

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
SMOKE: dict[str, list[str]] = {
    "adaspec_epoch_time": ["--datasets", "texas", "--repeats", "1", "--epochs", "2"],
    "bridgedrive_latency": ["--repeats", "2"],
    "crosstok_general": ["--prefixes", "2", "--horizon", "2", "--merges", "32"],
    "crosstok_scoring": ["--quick"],
    "datamask_speed": ["--smoke"],
    "ddp_cpu_throughput": ["--smoke"],
    "deepweightflow_generation": ["--smoke"],
    "disco_scaling": ["--sizes", "2000", "--queries", "2", "--nlist", "16", "--out", "disco_scaling.json"],
    "dre_aggregation_speed": ["--smoke"],
    "fingerprint_pair_speed": ["--smoke", "--repeats", "1"],
    "kan_layer_speed": ["--quick", "--repeats", "2", "--batch", "256"],
    "lm_throughput": ["--smoke"],
    "metacog_throughput": ["--quick", "--repeats", "1"],
    "mga_pipeline": ["--documents", "50", "--repeats", "1"],
    "obsdiff_class_spread": ["--smoke", "--tag", "smoke"],
    "obsdiff_prune_time": ["--smoke"],
    "obsdiff_structured_speed": ["--smoke"],
    "quantsgd_simulator_speed": ["--quick", "--repeats", "1"],
    "skyevents_gpu": ["--device", "cpu", "--gaussians", "200", "--repeats", "1", "--sizes", "flight_48x64"],
    "skyevents_projection_peer": ["--gaussians", "200", "--repeats", "1"],
    "skyevents_renderers": ["--smoke"],
    "skyevents_speed": ["--steps", "2"],
    "sparsed_attention_speed": ["--smoke"],
    "sparsed_gpu_speed": ["--lengths", "256"],
    "startup_time": ["--repeats", "1"],
    "symspace_cartan_loss": ["--repeats", "2"],
    "tpnn_mcmc_speed": ["--smoke"],
    "trainer_overhead": ["--smoke"],
    "veracity_search": ["--chains", "2", "--lm-steps", "10"],
    "webscale_rl_filters": ["--entities", "20", "--repeats", "1"],
}
# What a benchmark needs beyond `make install`: (present here, the start of the line it stops with if not).
NEEDS = {
    "kan_layer_speed": (importlib.util.find_spec("kan") is not None, "pykan is needed"),
    "sparsed_gpu_speed": (torch.cuda.is_available(), "sparsed_gpu_speed needs a CUDA GPU"),
}


def test_every_benchmark_has_a_smoke_size() -> None:
    assert sorted(SMOKE) == sorted(path.stem for path in BENCHMARKS.glob("[!_]*.py"))


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(SMOKE))
def test_benchmark_runs_at_its_smoke_size(name: str, tmp_path: Path) -> None:
    (tmp_path / "benchmarks").mkdir()
    for script in BENCHMARKS.glob("*.py"):
        shutil.copy(script, tmp_path / "benchmarks")
    done = run_cli(["python", f"benchmarks/{name}.py", *SMOKE[name]], cwd=tmp_path, timeout=600)
    present, stop_line = NEEDS.get(name, (True, ""))
    if not present:
        assert done.returncode == 1
        assert done.stderr.strip().splitlines()[-1].startswith(stop_line), done.stderr[-2000:]
        return
    assert done.returncode == 0, done.stderr[-3000:]
    written = list(tmp_path.rglob("*.json"))
    assert len(written) == 1, written
    result = json.loads(written[0].read_text())
    assert isinstance(result, dict) and result
