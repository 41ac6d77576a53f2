"""``litlab-eval``: test a checkpoint with an experiment's data and model config."""

from __future__ import annotations

import logging
from pathlib import Path

import hydra
import torch
from omegaconf import DictConfig

from litlab.utils import experiment as exp
from litlab.utils.cli import check_group_choice
from litlab.utils.errors import LitlabError, run_reporting_errors

log = logging.getLogger("litlab")


def check_checkpoint(path: str | Path) -> None:
    """Fail early, with a clear message, on a missing or unreadable checkpoint file."""
    path = Path(path)
    if not path.is_file():
        raise LitlabError(
            f"ckpt_path={path} does not exist; give a .ckpt file from a run's checkpoints/ folder"
        )
    try:
        checkpoint = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except Exception as error:
        raise LitlabError(
            f"ckpt_path={path} is not a readable checkpoint ({error}); it may be corrupt"
        ) from error
    if "state_dict" not in checkpoint:
        raise LitlabError(f"ckpt_path={path} has no state_dict; it is not a Lightning checkpoint")


def evaluate(cfg: DictConfig) -> float | None:
    """Test ``cfg.ckpt_path`` on ``cfg.data`` and return ``optimized_metric``."""
    check_checkpoint(cfg.ckpt_path)
    exp.prepare(cfg)
    datamodule, model = exp.build_data_and_model(cfg)
    trainer = exp.build_trainer(cfg)
    try:
        trainer.test(model, datamodule=datamodule, ckpt_path=cfg.ckpt_path, weights_only=True)
        value = exp.metric_value(dict(trainer.callback_metrics), cfg.get("optimized_metric"))
    finally:
        exp.finish_loggers(trainer)
    return value


@hydra.main(version_base="1.3", config_path="pkg://litlab.configs", config_name="eval")
def _hydra_main(cfg: DictConfig) -> float | None:
    return run_reporting_errors(evaluate, cfg)


def main() -> None:
    """Console entry point: ``litlab-eval experiment=<paper>/<name> ckpt_path=<file>``."""
    check_group_choice("experiment")
    _hydra_main()


if __name__ == "__main__":
    main()
