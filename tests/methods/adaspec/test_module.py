"""The LightningModule and its data contract, training through the Fitter, the tasks at tiny sizes."""

from __future__ import annotations

import dataclasses
import functools
from pathlib import Path

import hydra
import lightning as L
import pandas as pd
import pytest
import torch

from litlab import contract
from litlab.core.errors import LitlabError
from litlab.datamodules.csbm import CSBMDataModule
from litlab.datamodules.graphs import node_data_spec
from litlab.fitting import Fitter
from litlab.methods.adaspec.bases import GPRGNN
from litlab.methods.adaspec.matrix import AdaSpecMatrix
from litlab.methods.adaspec.module import NodeClassifier, node_score
from litlab.methods.adaspec.network import GraphModel
from litlab.methods.adaspec.training import fit_node_classifier
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
    module.bind_data(node_data_spec(easy_graph, "accuracy"))
    groups = module.configure_optimizers().param_groups
    assert len(groups) == 3
    assert groups[1]["params"] == [module.network.backbone.gamma] and groups[1]["weight_decay"] == 0.0
    assert groups[2]["params"] == [module.network.matrix.b_raw] and groups[2]["weight_decay"] == 0.0
    assert groups[0]["weight_decay"] == 5e-4


def test_data_contract_binds_the_graph_and_declares_metrics() -> None:
    datamodule = CSBMDataModule(n=200, p=30, phi=0.6, seed=0)
    module = _classifier(adaspec=True)
    assert set(module.logged_metrics()) >= {"val/acc", "val/roc_auc"}  # metric not known before binding
    with pytest.raises(LitlabError, match="bind_data"):
        module.configure_optimizers()
    contract.check_pair(module, datamodule)
    contract.bind(module, datamodule)
    assert module.network.matrix.b.numel() == datamodule.graph.num_nodes == 200
    assert module.metric == "accuracy" and "test/acc" in module.logged_metrics()
    contract.check_metric(module, "test/acc")
    with pytest.raises(LitlabError, match="test/roc_auc"):
        contract.check_metric(module, "test/roc_auc")
    with pytest.raises(LitlabError, match="missing edge_index"):
        _classifier(adaspec=True).bind_data({"features": datamodule.graph.x, "num_classes": 2})


def test_same_seed_pairs_base_and_adaspec(easy_graph) -> None:
    """Same seed, same MLP initialisation; the AdaSpec run also learns b, the base run has none."""
    base, adaspec = _classifier(False), _classifier(True)
    for module in (base, adaspec):
        torch.manual_seed(3)
        module.bind_data(node_data_spec(easy_graph, "accuracy"))
    torch.testing.assert_close(base.network.backbone.lin1.weight, adaspec.network.backbone.lin1.weight)
    fitter = Fitter()
    result = fit_node_classifier(fitter, adaspec, easy_graph, max_epochs=30, patience=30, seed=3)
    assert not torch.allclose(adaspec.network.matrix.b, AdaSpecMatrix(easy_graph.edge_index, easy_graph.x).b)
    again = fit_node_classifier(fitter, _classifier(True), easy_graph, max_epochs=30, patience=30, seed=3)
    assert result == dataclasses.replace(again, seconds=result.seconds)


def test_training_learns_an_easy_graph_and_stops_early(easy_graph) -> None:
    result = fit_node_classifier(Fitter(), _classifier(True), easy_graph, max_epochs=300, patience=10)
    assert result.test_score > 0.8  # chance is 0.5
    assert result.epochs < 300 and result.epochs - 1 - result.best_epoch == 10


def _bound(datamodule: CSBMDataModule) -> NodeClassifier:
    module = _classifier(adaspec=True)
    contract.bind(module, datamodule)
    return module


def test_lightning_fit_and_test_log_metrics_and_figures(tmp_path: Path) -> None:
    datamodule = CSBMDataModule(n=200, p=30, phi=0.6, seed=0)
    module = _bound(datamodule)
    trainer = L.Trainer(
        max_epochs=5, logger=False, enable_checkpointing=False, enable_progress_bar=False,
        enable_model_summary=False, default_root_dir=tmp_path, log_every_n_steps=1,
    )  # fmt: skip
    trainer.fit(module, datamodule=datamodule)
    assert {"train/loss", "train/acc", "val/loss", "val/acc"} <= set(trainer.callback_metrics)
    assert "test/acc" not in trainer.callback_metrics  # test only in test(), unless test_in_validation
    trainer.test(module, datamodule=datamodule)
    assert {"test/loss", "test/acc"} <= set(trainer.callback_metrics)
    assert set(module.figures("test")) == {"filter_response", "adaspec_b"}
    assert module.figures("fit") == {}


def test_checkpoint_round_trip_restores_b(tmp_path: Path) -> None:
    datamodule = CSBMDataModule(n=200, p=30, phi=0.6, seed=0)
    module = _bound(datamodule)
    trainer = L.Trainer(max_epochs=3, logger=False, enable_progress_bar=False, default_root_dir=tmp_path)
    trainer.fit(module, datamodule=datamodule)
    path = tmp_path / "model.ckpt"
    trainer.save_checkpoint(path)
    fresh_data = CSBMDataModule(n=200, p=30, phi=0.6, seed=0)
    fresh = _bound(fresh_data)
    tester = L.Trainer(logger=False, enable_progress_bar=False, default_root_dir=tmp_path)
    tester.test(fresh, datamodule=fresh_data, ckpt_path=path, weights_only=True)
    torch.testing.assert_close(fresh.network.matrix.b, module.network.matrix.b)


def test_distinguishability_task_returns_table_and_plot(compose_config, tmp_path: Path) -> None:
    cfg = compose_config(
        "run", ["task=adaspec/distinguishability", "task.datasets=[texas]", "task.train_epochs=60"]
    )
    output = hydra.utils.instantiate(cfg.task)(TaskContext.local(tmp_path))
    table = pd.DataFrame(output["tables"]["distinguishability"])
    assert list(table["matrix"]) == ["A_tilde_self_loops", "A_tilde", "Omega_D", "Omega", "Omega_trained"]
    assert set(output["figures"]) == {"eigenvalues_texas"}
    results = output["metrics"]
    assert results["texas/A_tilde_self_loops/distinct"] == 123 and results["texas/Omega/distinct"] == 135
    assert results["texas/Omega_trained/distinct"] >= 175  # a trained b splits the structural ties


def test_study_task_pairs_arms_and_labels_claims(compose_config, tmp_path: Path) -> None:
    overrides = ["task=adaspec/study", "task.datasets=[texas,cornell]", "task.seeds=[0,1]"]
    overrides += ["task.max_epochs=3"]
    cfg = compose_config("run", overrides)
    output = hydra.utils.instantiate(cfg.task)(TaskContext.local(tmp_path))
    tables = {name: pd.DataFrame(rows) for name, rows in output["tables"].items()}
    runs = tables["runs"]
    assert len(runs) == 2 * 2 * 9 and set(runs["unit"]) == {"texas+cornell"}
    majority = runs[runs["arm"] == "majority"].set_index(["dataset", "seed"])["test"]
    assert majority[("texas", 0)] == majority[("cornell", 0)]  # same labels and split, only edges differ
    pooled = tables["paired"].query("dataset == 'pooled'")
    assert set(pooled["units"]) == {1}  # Texas and Cornell count once
    assert list(tables["verdicts"]["claim"])[:2] == ["adaspec_improves_chebnet", "adaspec_improves_gprgnn"]
    assert tables["verdicts"]["claim"].iloc[-1].startswith("overall")
    assert set(tables["verdicts"]["label"]) <= {"reproduced", "partly", "not reproduced", "reversed"}
    assert "pooled/chebnet_adaspec-chebnet/diff" in output["metrics"]
    assert set(output["figures"]) == {"paired_differences"}
