"""The LightningModule, the plain training loop, and the two tasks run end to end at tiny sizes."""

from __future__ import annotations

import functools
from pathlib import Path

import hydra
import lightning as L
import pandas as pd
import pytest
import torch

from litlab.datamodules.csbm import CSBMDataModule
from litlab.methods.adaspec.bases import GPRGNN
from litlab.methods.adaspec.matrix import AdaSpecMatrix
from litlab.methods.adaspec.module import NodeClassifier, node_score
from litlab.methods.adaspec.network import GraphModel
from litlab.methods.adaspec.training import fit_full_batch
from litlab.task import TaskContext


def _classifier(adaspec: bool, **optimizer) -> NodeClassifier:
    matrix = functools.partial(AdaSpecMatrix, alpha2=0.1) if adaspec else None
    network = functools.partial(GraphModel, functools.partial(GPRGNN, hidden_channels=16, K=4), matrix)
    return NodeClassifier(
        network,
        functools.partial(torch.optim.Adam, lr=0.01, weight_decay=5e-4, **optimizer),
        filter_weight_decay=0.0,
    )


@pytest.fixture(scope="module")
def easy_graph():
    """A homophilous cSBM (φ = 0.6), 300 nodes, AdaSpec's sparse split."""
    module = CSBMDataModule(n=300, p=60, phi=0.6, seed=0)
    module.setup("fit")
    return module.graph


def test_node_score_accuracy_and_roc_auc() -> None:
    logits = torch.tensor([[2.0, 0.0], [0.0, 1.0], [0.5, 0.0], [0.0, 3.0]])
    y = torch.tensor([0, 1, 1, 1])
    assert float(node_score(logits, y, "accuracy")) == 0.75
    assert float(node_score(logits, y, "roc_auc")) == 1.0  # positives all rank above the negative
    with pytest.raises(ValueError, match="metric"):
        node_score(logits, y, "f1")


def test_parameter_groups_separate_filter_and_b(easy_graph) -> None:
    module = _classifier(adaspec=True)
    module.build(easy_graph)
    groups = module.configure_optimizers().param_groups
    assert len(groups) == 3
    assert groups[1]["params"] == [module.network.backbone.gamma] and groups[1]["weight_decay"] == 0.0
    assert groups[2]["params"] == [module.network.matrix.b_raw] and groups[2]["weight_decay"] == 0.0
    assert groups[0]["weight_decay"] == 5e-4


def test_same_seed_pairs_base_and_adaspec(easy_graph) -> None:
    """Same seed, same MLP initialisation; the AdaSpec run also learns b, the base run has none."""
    base, adaspec = _classifier(False), _classifier(True)
    for module in (base, adaspec):
        torch.manual_seed(3)
        module.build(easy_graph)
    torch.testing.assert_close(base.network.backbone.lin1.weight, adaspec.network.backbone.lin1.weight)
    result = fit_full_batch(adaspec, easy_graph, max_epochs=30, patience=30, seed=3)
    assert not torch.allclose(adaspec.network.matrix.b, AdaSpecMatrix(easy_graph.edge_index, easy_graph.x).b)
    again = fit_full_batch(_classifier(True), easy_graph, max_epochs=30, patience=30, seed=3)
    assert result.test_score == again.test_score and result.best_epoch == again.best_epoch


def test_training_learns_an_easy_graph_and_stops_early(easy_graph) -> None:
    result = fit_full_batch(_classifier(True), easy_graph, max_epochs=300, patience=10, seed=0)
    assert result.test_score > 0.8  # chance is 0.5
    assert result.epochs < 300 and result.epochs - 1 - result.best_epoch == 10


def test_lightning_fit_and_test_log_metrics_and_figures(tmp_path: Path) -> None:
    datamodule = CSBMDataModule(n=200, p=30, phi=0.6, seed=0)
    module = _classifier(adaspec=True)
    trainer = L.Trainer(
        max_epochs=5, logger=False, enable_checkpointing=False, enable_progress_bar=False,
        enable_model_summary=False, default_root_dir=tmp_path, log_every_n_steps=1,
    )  # fmt: skip
    trainer.fit(module, datamodule=datamodule)
    assert {"train/loss", "train/acc", "val/loss", "val/acc"} <= set(trainer.callback_metrics)
    trainer.test(module, datamodule=datamodule)
    assert {"test/loss", "test/acc"} <= set(trainer.callback_metrics)
    assert set(module.figures("test")) == {"filter_response", "adaspec_b"}
    assert module.figures("fit") == {}


def test_checkpoint_round_trip_restores_b(tmp_path: Path) -> None:
    datamodule = CSBMDataModule(n=200, p=30, phi=0.6, seed=0)
    module = _classifier(adaspec=True)
    trainer = L.Trainer(max_epochs=3, logger=False, enable_progress_bar=False, default_root_dir=tmp_path)
    trainer.fit(module, datamodule=datamodule)
    path = tmp_path / "model.ckpt"
    trainer.save_checkpoint(path)
    fresh = _classifier(adaspec=True)
    tester = L.Trainer(logger=False, enable_progress_bar=False, default_root_dir=tmp_path)
    tester.test(
        fresh, datamodule=CSBMDataModule(n=200, p=30, phi=0.6, seed=0), ckpt_path=path, weights_only=True
    )
    torch.testing.assert_close(fresh.network.matrix.b, module.network.matrix.b)


def test_distinguishability_task_writes_table_and_plot(compose_config, tmp_path: Path) -> None:
    cfg = compose_config(
        "run", ["task=adaspec/distinguishability", "task.datasets=[texas]", "task.train_epochs=60"]
    )
    results = hydra.utils.instantiate(cfg.task)(TaskContext.local(tmp_path))["metrics"]
    table = pd.read_csv(tmp_path / "distinguishability.csv")
    assert list(table["matrix"]) == ["A_tilde_self_loops", "A_tilde", "Omega_D", "Omega", "Omega_trained"]
    assert (tmp_path / "eigenvalues_texas.png").stat().st_size > 0
    assert results["texas/A_tilde_self_loops/distinct"] == 123 and results["texas/Omega/distinct"] == 135
    assert results["texas/Omega_trained/distinct"] >= 175  # a trained b splits the structural ties


def test_claim_task_writes_paired_table(compose_config, tmp_path: Path) -> None:
    cfg = compose_config(
        "run", ["task=adaspec/claim", "task.datasets=[cornell]", "task.seeds=[0,1]", "task.max_epochs=5"]
    )
    results = hydra.utils.instantiate(cfg.task)(TaskContext.local(tmp_path))["metrics"]
    runs = pd.read_csv(tmp_path / "runs.csv")
    assert len(runs) == 8 and set(runs["model"]) == {"chebnet", "chebnet_adaspec", "gprgnn", "gprgnn_adaspec"}
    paired = pd.read_csv(tmp_path / "paired.csv")
    assert list(paired["base"]) == ["chebnet", "gprgnn"] and list(paired["n"]) == [2, 2]
    assert set(results) == {"diff/chebnet", "diff/gprgnn", "diff/mean"}
    assert "chebnet_adaspec" in (tmp_path / "table.md").read_text()
