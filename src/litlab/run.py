"""``litlab-run task=<name>``: run a non-training task (analysis, pipeline, report) in a run folder."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import hydra
from omegaconf import DictConfig

from litlab.utils import experiment as exp
from litlab.utils.cli import check_group_choice
from litlab.utils.errors import LitlabError, run_reporting_errors

log = logging.getLogger("litlab")


def run_task(cfg: DictConfig) -> float | None:
    """Instantiate ``cfg.task`` (a partial callable) and call it with the run folder.

    A task returns a dict of scalar results (written to ``results.json`` by the task itself if it
    wants) or a float; ``optimized_metric`` picks one of the dict's keys for sweepers.
    """
    output_dir = exp.prepare(cfg)
    task = hydra.utils.instantiate(cfg.task)
    if not callable(task):
        raise LitlabError(
            f"task {cfg.task.get('_target_')} is not callable; set _partial_: true in its config"
        )
    result: Any = task(output_dir=Path(output_dir))
    if isinstance(result, dict):
        return exp.metric_value(result, cfg.get("optimized_metric"))
    return None if result is None else float(result)


@hydra.main(version_base="1.3", config_path="pkg://litlab.configs", config_name="run")
def _hydra_main(cfg: DictConfig) -> float | None:
    return run_reporting_errors(run_task, cfg)


def main() -> None:
    """Console entry point: ``litlab-run task=<name> [overrides]``."""
    check_group_choice("task")
    _hydra_main()


if __name__ == "__main__":
    main()
