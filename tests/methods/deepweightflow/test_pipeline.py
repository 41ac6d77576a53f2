"""The four stages chained through files at a tiny size: zoo task -> canonicalise task -> flow
experiment (reading the canonical zoo) -> evaluation task."""

from __future__ import annotations

import json
from pathlib import Path

from hydra.utils import instantiate

from litlab.core.results import table_rows
from litlab.datamodules.weights import load_zoo
from litlab.task import TaskContext
from litlab.train import train


def test_stages_hand_over_files(compose_config, tmp_path: Path) -> None:
    zoo_cfg = compose_config(
        "run",
        [
            "task=deepweightflow/zoo",
            "~task.arch",
            "+task.arch={name:mlp,sizes:[4,8,3]}",
            "task.dataset=iris",
            "task.n_networks=12",
            "task.epochs=20",
            "task.batch_size=16",
        ],
    )
    zoo_results = instantiate(zoo_cfg.task)(TaskContext.local(tmp_path / "stage1"))["metrics"]
    assert zoo_results["acc_mean"] > 0.6 and zoo_results["networks_per_minute"] > 0
    index = json.loads((tmp_path / "stage1" / "zoo" / "index.json").read_text())
    assert len(index["networks"]) == 12 and {"seed", "accuracy"} <= set(index["networks"][0])

    canon_cfg = compose_config(
        "run", ["task=deepweightflow/canonicalise", f"task.zoo_dir={tmp_path}/stage1/zoo"]
    )
    canon = instantiate(canon_cfg.task)(TaskContext.local(tmp_path / "stage2"))["metrics"]
    assert canon["distance_after"] < canon["distance_before"]
    assert load_zoo(tmp_path / "stage2" / "zoo").canonical

    train_cfg = compose_config(
        "train",
        [
            "experiment=deepweightflow/mlp_iris",
            f"data.zoo.zoo_dir={tmp_path}/stage2/zoo",
            "data.n_train=8",
            "trainer.max_steps=30",
            "trainer.check_val_every_n_epoch=10",
            "model.n_generate=6",
            "model.ensemble_sizes=[2,6]",
            "model.steps=10",
            "logger=csv",
            "callbacks.rich_progress_bar=null",
        ],
    )
    value = train(train_cfg)
    assert 0.0 <= value <= 1.0
    generated = load_zoo(tmp_path / "generated")
    assert len(generated) == 6 and generated.canonical
    assert (tmp_path / "plots" / "test_accuracy.png").exists()

    eval_cfg = compose_config(
        "run",
        [
            "task=deepweightflow/evaluate",
            f"task.zoo_dir={tmp_path}/stage2/zoo",
            f"+task.generated.flow={tmp_path}/generated",
            "task.n_train=8",
        ],
    )
    output = instantiate(eval_cfg.task)(TaskContext.local(tmp_path / "stage4"))
    assert {
        "flow/acc_mean",
        "heldout_real/nn_dist_mean",
        "noise_added/knob",
        "interpolation_matched/seg_dist_mean",
        "nearest_copy/nn_dist_mean",
    } <= set(output["metrics"])
    assert output["metrics"]["nearest_copy/nn_dist_mean"] == 0.0  # exact differences, not Gram products
    rows = table_rows(output["tables"]["evaluation"])
    assert [r["set"] for r in rows][:2] == ["heldout_real", "flow"] and "novelty" in output["figures"]
