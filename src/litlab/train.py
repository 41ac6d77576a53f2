"""``litlab-train``: fit an experiment, test it, and return ``optimized_metric`` for sweepers."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import hydra
from omegaconf import DictConfig

from litlab.runner import experiment as exp
from litlab.runner.launch import start
from litlab.runner.reporting import run_reporting_errors

if TYPE_CHECKING:
    import lightning as L


def train(cfg: DictConfig) -> float | None:
    """Fit ``cfg.model`` on ``cfg.data`` with ``cfg.trainer``, then test the chosen checkpoint."""
    from litlab.core.results import write_results

    exp.check_launch(cfg)
    with exp.open_run(cfg) as output_dir:
        datamodule, model = exp.build_data_and_model(cfg)
        ckpt_path = exp.resolve_resume(cfg, output_dir)
        checkpoint = exp.check_checkpoint(ckpt_path, "resume") if ckpt_path is not None else None
        if checkpoint is not None:
            exp.check_checkpoint_fits(checkpoint, model, f"resume={ckpt_path}")
        trainer = exp.build_trainer(cfg)
        exp.record_run(cfg, output_dir)
        if checkpoint is not None:
            exp.forget_metrics_after(trainer, int(checkpoint["global_step"]))
        try:
            exp.log_hyperparameters(cfg, trainer, model)
            trainer.fit(model, datamodule=datamodule, ckpt_path=ckpt_path, weights_only=True)
            metrics = dict(trainer.callback_metrics)
            if cfg.get("test"):
                trainer.test(
                    model, datamodule=datamodule, ckpt_path=_test_ckpt(cfg, trainer), weights_only=True
                )
                metrics.update(trainer.callback_metrics)
            value = exp.metric_value(metrics, cfg.get("optimized_metric"))
        finally:
            exp.finish_loggers(trainer)
        if trainer.is_global_zero:
            write_results(
                output_dir,
                kind="train",
                name=str(cfg.experiment_name),
                metrics=metrics,
                optimized_metric=cfg.get("optimized_metric"),
                value=value,
            )
            _print_summary(output_dir, trainer, value, cfg.get("optimized_metric"))
    return value


def _test_ckpt(cfg: DictConfig, trainer: L.Trainer) -> str | None:
    """The checkpoint to test: best if one was tracked, else the weights in memory."""
    choice = cfg.get("test_ckpt")
    callback = trainer.checkpoint_callback
    if choice == "best":
        best = getattr(callback, "best_model_path", "") if callback else ""
        return best or None
    if choice == "last":
        return exp.last_checkpoint_path(trainer) or None
    return choice


def _print_summary(output_dir: Path, trainer: L.Trainer, value: float | None, name: str | None) -> None:
    lines = [f"run folder: {output_dir}"]
    metrics_csv = sorted(output_dir.glob("csv/**/metrics.csv"))
    if metrics_csv:
        lines.append(f"  metrics:     {metrics_csv[0]}")
    last = exp.last_checkpoint_path(trainer)
    if last:
        lines.append(f"  checkpoint:  {last}")
    best = getattr(trainer.checkpoint_callback, "best_model_path", "")
    if best:
        lines.append(f"  best:        {best}")
    plots = output_dir / "plots"
    if plots.exists():
        lines.append(f"  plots:       {plots} ({len(list(plots.glob('*.png')))} png)")
    if name:
        lines.append(f"  {name} = {value:.6g}")
    print("\n".join(lines), flush=True)


@hydra.main(version_base="1.3", config_path="pkg://litlab.configs", config_name="train")
def _hydra_main(cfg: DictConfig) -> float | None:
    return run_reporting_errors(train, cfg)


def main() -> None:
    """Console entry point: ``litlab-train experiment=<paper>/<name> [overrides]``."""
    start("train")
    _hydra_main()


if __name__ == "__main__":
    main()
