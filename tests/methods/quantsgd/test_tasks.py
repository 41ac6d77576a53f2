"""The study runs end to end at a tiny size and writes its tables, plots and the paper-vs-ours verdicts."""

from __future__ import annotations

from pathlib import Path

from litlab.core.results import read_table, write_results
from litlab.methods.quantsgd.study import study
from litlab.task import TaskContext


def test_study_at_a_tiny_size_writes_every_table_and_plot(tmp_path: Path) -> None:
    output = study(
        TaskContext.local(tmp_path),
        seeds=[0, 1, 2],
        q1_args={"dim": 20, "checkpoints": [64, 256]},
        q2_args={"dims": [20, 40], "checkpoints": [64, 256]},
        batch_args={"batch_sizes": [1, 4], "n_steps": 128, "dim": 20},
        formats_args={"n_steps": 256, "dim": 20},
        lightning_seeds=[0, 1],
        lightning_steps=128,
    )
    write_results(tmp_path, kind="task", name="quantsgd/study", **output)
    tables = {"q1", "q2", "batch_effect", "formats", "fp_vs_int_rule", "lightning_check", "paper_vs_ours"}
    assert set(output["tables"]) == tables
    assert {p.stem for p in (tmp_path / "plots").glob("*.png")} == {"q1", "q2", "q2_curves", "batch_effect"}
    q1 = read_table(tmp_path, "q1")
    assert len(q1) == 7 * 2 and {"bound", "bound_q", "exact_risk", "gap_mean"} <= set(q1[1])
    exact = [r for r in q1 if r["exact_risk"]]
    assert len(exact) == 4 * 2  # full precision and the three additive settings
    verdicts = read_table(tmp_path, "paper_vs_ours")
    assert len(verdicts) == 7 and all(r["verdict"] for r in verdicts)
    assert output["metrics"]["q1/bound/violations"] == 0
    batch = read_table(tmp_path, "batch_effect")
    assert {r["problem"] for r in batch} == {"noise-only", "full"} and len(batch) == 4 * 2
