"""Hyperparameters given as config lists reach modules as Python lists, so checkpoints load safely."""

from __future__ import annotations

from pathlib import Path

import lightning as L
import torch
from omegaconf import OmegaConf

from litlab.runner.experiment import build_data_and_model


class ShapedModule(L.LightningModule):
    """A module whose hyperparameters include a list and a nested dict, as many papers' do."""

    def __init__(self, image_shape: list[int], schedule: dict[str, list[float]]) -> None:
        super().__init__()
        self.save_hyperparameters()


def test_list_hyperparameters_survive_a_weights_only_checkpoint(tmp_path: Path) -> None:
    cfg = OmegaConf.create(
        {
            "data": {"_target_": "lightning.LightningDataModule"},
            "model": {
                "_target_": f"{__name__}.ShapedModule",
                "image_shape": [1, 16, 16],
                "schedule": {"milestones": [0.5, 0.9]},
            },
        }
    )
    _, model = build_data_and_model(cfg)
    assert type(model.hparams.image_shape) is list
    torch.save({"hyper_parameters": dict(model.hparams)}, tmp_path / "h.ckpt")
    loaded = torch.load(tmp_path / "h.ckpt", weights_only=True)
    assert loaded["hyper_parameters"] == {"image_shape": [1, 16, 16], "schedule": {"milestones": [0.5, 0.9]}}
