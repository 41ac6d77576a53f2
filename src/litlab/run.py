"""``litlab-run task=<paper>/<name>``: work that is not one training run (studies, analyses, pipelines)."""

from __future__ import annotations

from pathlib import Path

import hydra
from omegaconf import DictConfig

from litlab.runner import experiment as exp
from litlab.runner.launch import start
from litlab.runner.reporting import run_reporting_errors


def run_task(cfg: DictConfig) -> float | None:
    """Call ``cfg.task`` with a TaskContext; write what it returns (results.json, tables, plots).

    With ``publish=true`` the results are also copied to ``results/<task name>/``, the committed
    evidence that the method READMEs quote.
    """
    from litlab.core.errors import ConfigError
    from litlab.core.results import check_task_output, publish, write_results
    from litlab.fitting import Fitter
    from litlab.runner.task_logging import send_results
    from litlab.task import TaskContext

    name = str(cfg.task_name)
    with exp.open_run(cfg) as output_dir:
        task = hydra.utils.instantiate(cfg.task, _convert_="partial")
        if not callable(task):
            raise ConfigError(f"task {name} is not callable; set _partial_: true in its config")
        ctx = TaskContext(
            output_dir=output_dir,
            fitter=Fitter.from_config(cfg.get("trainer")),
            seed=cfg.seed,
            torch_threads=cfg.extras.get("torch_threads"),
        )
        exp.record_run(cfg, output_dir)
        output = check_task_output(task(ctx), name)
        metrics = output.get("metrics", {})
        value = exp.metric_value(metrics, cfg.get("optimized_metric"))
        if ctx.fitter.is_global_zero:
            write_results(
                output_dir,
                kind="task",
                name=name,
                metrics=metrics,
                optimized_metric=cfg.get("optimized_metric"),
                value=value,
                tables=output.get("tables"),
                figures=output.get("figures"),
            )
            send_results(cfg, output_dir)
            if cfg.get("publish"):
                target = publish(output_dir, Path(cfg.paths.results_dir) / name)
                print(f"published to {target}", flush=True)
            print(f"run folder: {output_dir}", flush=True)
    return value


@hydra.main(version_base="1.3", config_path="pkg://litlab.configs", config_name="run")
def _hydra_main(cfg: DictConfig) -> float | None:
    return run_reporting_errors(run_task, cfg)


def main() -> None:
    """Console entry point: ``litlab-run task=<paper>/<name> [overrides]``."""
    start("run")
    _hydra_main()


if __name__ == "__main__":
    main()
