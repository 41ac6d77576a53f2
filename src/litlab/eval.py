"""``litlab-eval``: test a checkpoint with an experiment's data and model config."""

from __future__ import annotations

import hydra
from omegaconf import DictConfig

from litlab.runner import experiment as exp
from litlab.runner.launch import start
from litlab.runner.reporting import run_reporting_errors


def evaluate(cfg: DictConfig) -> float | None:
    """Test ``cfg.ckpt_path`` on ``cfg.data`` in a run folder of its own and return ``optimized_metric``."""
    from litlab.core.results import write_results

    checkpoint = exp.check_checkpoint(cfg.ckpt_path)
    with exp.open_run(cfg) as output_dir:
        datamodule, model = exp.build_data_and_model(cfg)
        exp.check_checkpoint_fits(checkpoint, model, f"ckpt_path={cfg.ckpt_path}")
        trainer = exp.build_trainer(cfg)
        exp.record_run(cfg, output_dir)
        try:
            trainer.test(model, datamodule=datamodule, ckpt_path=cfg.ckpt_path, weights_only=True)
            metrics = dict(trainer.callback_metrics)
            value = exp.metric_value(metrics, cfg.get("optimized_metric"))
        finally:
            exp.finish_loggers(trainer)
        if trainer.is_global_zero:
            write_results(
                output_dir,
                kind="eval",
                name=str(cfg.experiment_name),
                metrics=metrics,
                optimized_metric=cfg.get("optimized_metric"),
                value=value,
            )
    return value


@hydra.main(version_base="1.3", config_path="pkg://litlab.configs", config_name="eval")
def _hydra_main(cfg: DictConfig) -> float | None:
    return run_reporting_errors(evaluate, cfg)


def main() -> None:
    """Console entry point: ``litlab-eval experiment=<paper>/<name> ckpt_path=<file>``."""
    start("eval")
    _hydra_main()


if __name__ == "__main__":
    main()
