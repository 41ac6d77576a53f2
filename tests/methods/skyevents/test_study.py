"""The skyevents_study task at a tiny size writes its tables, image grid and results."""

from __future__ import annotations

from pathlib import Path

from litlab.methods.skyevents.study import skyevents_study
from litlab.task import TaskContext


def test_study_writes_tables_grid_and_results(tmp_path: Path) -> None:
    results = skyevents_study(
        TaskContext.local(tmp_path),
        conditions=["low_light"],
        offsets=[0.003],
        seeds=[5],
        setups=["a_rgb_only", "d_rer_gta"],
        steps=3,
        planted_offset=0.007,
        flight={"duration": 0.4},
    )
    assert set(results["metrics"]) == {
        "gta_error_ms/low_light",
        "psnr/low_light/a_rgb_only",
        "psnr/low_light/d_rer_gta",
    }
    assert set(results["tables"]) == {
        "gta_errors",
        "gta_summary",
        "reconstruction",
        "reconstruction_seed_spread",
    }
    assert {"gta_error_ms", "gta_flat_error_ms"} <= set(results["tables"]["gta_errors"].columns)
    assert (tmp_path / "gta.csv").read_text().count("\n") == 2
    assert (tmp_path / "reconstruction.csv").read_text().count("\n") == 3
    assert "GTA" in (tmp_path / "tables.md").read_text()
    assert (tmp_path / "plots" / "views_low_light.png").exists()
