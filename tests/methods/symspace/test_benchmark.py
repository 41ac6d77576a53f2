"""The benchmark task runs end to end at a tiny size and writes its table, results and plots."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from hydra.utils import instantiate
from omegaconf import open_dict

from litlab.task import TaskContext


def test_benchmark_task_writes_table_results_and_grids(compose_config, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("LITLAB_CACHE", str(tmp_path / "cache"))
    cfg = compose_config(
        "run",
        [
            "task=symspace/benchmark",
            "task.cases=[0]",
            "task.max_steps=2",
            "task.classifier_epochs=1",
            "+task.data.grid.n_scales=2",
            "+task.data.grid.n_orientations=2",
            "+task.data.grid.n_positions=4",
            "task.data.batch_size=16",
            "task.models.cartanfm.unet_width=8",
            "task.models.cartanfm.sample_steps=2",
            "task.models.cartanfm_paper_decoder.unet_width=8",
            "task.models.cartanfm_paper_decoder.sample_steps=2",
        ],
    )
    with open_dict(cfg):
        kept = ("vae", "cartanfm", "cartanfm_paper_decoder")
        cfg.task.models = {name: cfg.task.models[name] for name in kept}
    results = instantiate(cfg.task)(TaskContext.local(tmp_path))["metrics"]
    assert set(results) == {"vae/heldout_bce", "cartanfm/heldout_bce", "cartanfm_paper_decoder/heldout_bce"}
    runs = pd.read_csv(tmp_path / "runs.csv")
    assert list(runs["model"]) == ["data", "vae", "cartanfm", "cartanfm_paper_decoder"]
    data_row = runs.set_index("model").loc["data"]
    assert 0.0 <= data_row["heldout_acc_all"] <= 1.0
    cartan = runs.set_index("model").loc["cartanfm"]
    assert 0.0 <= cartan["mirror_in_heldout"] <= 1.0 and cartan["cartan_residual_pp"] > 0
    assert 0.0 <= cartan["heldout_k_share"] <= 1.0 and cartan["cartan_orthogonality"] > 0
    assert "heldout_bce" in (tmp_path / "table.md").read_text()
    assert (tmp_path / "plots" / "r2r_case0_heldout.png").exists()
