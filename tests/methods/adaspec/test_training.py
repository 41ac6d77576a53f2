"""Training through the Fitter equals, bit for bit, the hand-written full-batch loop it replaced."""

from __future__ import annotations

import math

import hydra
import pytest
import torch
from torch_geometric.data import Data

from litlab.datamodules.graphs import load_node_graph, node_data_spec
from litlab.fitting import Fitter
from litlab.methods.adaspec.module import NodeClassifier
from litlab.methods.adaspec.training import fit_node_classifier


def hand_loop(module: NodeClassifier, graph: Data, max_epochs: int, patience: int, seed: int) -> tuple:
    """The loop of the previous ``training.fit_full_batch``: step, validate, keep the test score at the
    lowest validation loss, stop ``patience`` epochs after it."""
    torch.manual_seed(seed)
    module.bind_data(node_data_spec(graph, "accuracy"))
    optimizer = module.configure_optimizers()
    best = (math.inf, math.nan, math.nan, -1)
    epoch = 0
    for epoch in range(max_epochs):
        module.train()
        optimizer.zero_grad(set_to_none=True)
        loss, _ = module.loss_and_score(module(graph.x), graph, graph.train_mask)
        loss.backward()
        optimizer.step()
        module.eval()
        with torch.no_grad():
            logits = module(graph.x)
            val_loss, val_score = module.loss_and_score(logits, graph, graph.val_mask)
            if float(val_loss) < best[0]:
                _, test_score = module.loss_and_score(logits, graph, graph.test_mask)
                best = (float(val_loss), float(val_score), float(test_score), epoch)
            elif epoch - best[3] >= patience:
                break
    return best, epoch + 1


@pytest.mark.parametrize("model", ["chebnet_adaspec", "gprgnn"])
def test_fitter_equals_the_hand_loop(model: str, compose_config) -> None:
    cfg = compose_config("train", ["experiment=adaspec/texas", f"model=adaspec/{model}"])
    graph = load_node_graph("cornell", seed=1)
    reference = hydra.utils.instantiate(cfg.model)
    (val_loss, val_score, test_score, best_epoch), epochs = hand_loop(reference, graph, 120, 15, seed=1)
    module = hydra.utils.instantiate(cfg.model)
    fit = fit_node_classifier(Fitter(), module, graph, "accuracy", max_epochs=120, patience=15, seed=1)
    assert (fit.val_loss, fit.val_score, fit.test_score) == (val_loss, val_score, test_score)
    assert (fit.best_epoch, fit.epochs) == (best_epoch, epochs) and epochs < 120  # stopped by patience
    for ours, theirs in zip(module.parameters(), reference.parameters(), strict=True):
        assert torch.equal(ours, theirs)
