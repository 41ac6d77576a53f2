"""The renderer study at a tiny size: one oblique flight, both renderers, a few steps."""

from __future__ import annotations

from pathlib import Path

import pytest

from litlab.core.errors import ConfigError
from litlab.methods.skyevents.gs_study import renderer_study
from litlab.task import TaskContext
from tests.methods.skyevents.test_oblique import OBLIQUE

FLIGHT = {k: v for k, v in OBLIQUE.items() if k not in ("seed", "condition")}
GAUSSIANS = {"splat_spacing": 3.0, "wall_fill": True, "seen_only": True}


def test_renderer_study_reports_both_renderers_and_the_dem_floor(tmp_path: Path) -> None:
    results = renderer_study(
        TaskContext.local(tmp_path),
        seeds=[3],
        flights={"oblique": FLIGHT},
        conditions=["normal"],
        setups=["a_rgb_only"],
        renderers={
            "texture": {"steps": 2, "batch_size": 2},
            "gaussians": {
                "steps": 2,
                "batch_size": 2,
                "splat_spacing": 3.0,
                "wall_fill": True,
                "seen_only": True,
            },
        },
    )
    assert set(results["metrics"]) == {
        "psnr/oblique/normal/texture/a_rgb_only",
        "psnr/oblique/normal/gaussians/a_rgb_only",
        "dem_floor_psnr/oblique/normal",
    }
    summary = results["tables"]["summary"]
    assert len(summary) == 2 and {"psnr_mean", "ssim_mean", "dem_floor_psnr"} <= set(summary.columns)


def test_setups_the_study_cannot_run_are_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="task.setups"):
        renderer_study(TaskContext.local(tmp_path), setups=["f_rer_gta_flat"])
