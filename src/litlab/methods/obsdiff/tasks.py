"""``litlab-run task=obsdiff/prune``: prune the cached tiny DiT, judge it, save it in diffusers format."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from litlab.core.errors import ConfigError
from litlab.core.results import TaskOutput
from litlab.methods.obsdiff.dit import eps_flops, save_dit
from litlab.methods.obsdiff.pipeline import judge, pruned_copy, reference, sample_grid
from litlab.methods.obsdiff.prune import PruneSpec
from litlab.methods.obsdiff.targets import trained_classifier, trained_dit
from litlab.task import TaskContext


def parse_nm(pattern: str | None) -> tuple[int, int]:
    """'2:4' -> (2, 4); None or '' -> (0, 0) (unstructured)."""
    if not pattern:
        return 0, 0
    try:
        n, m = (int(part) for part in str(pattern).split(":"))
    except ValueError as error:
        raise ConfigError(f"nm must look like '2:4', got {pattern!r}") from error
    return n, m


def prune(
    ctx: TaskContext,
    *,
    method: str = "obs",
    sparsity: float = 0.5,
    nm: str | None = None,
    structure: str = "ffn",
    groups: int = 4,
    timestep_weighting: str = "log_decrease",
    w_min: float = 0.8,
    w_max: float = 1.2,
    n_calibration: int = 32,
    calibration_seed: int = 0,
    steps: int = 20,
    guidance: float = 2.0,
    eval_samples: int = 256,
    patterns: Sequence[str] | None = None,
    checkpoint: str | None = None,
    dit: Mapping[str, Any] | None = None,
    classifier: Mapping[str, Any] | None = None,
) -> TaskOutput:
    """Prune once with ``method`` and report the dense and pruned metrics side by side. Structured methods
    remove ``sparsity`` of every block's FFN neurons, attention heads, or both (``structure``)."""
    n, m = parse_nm(nm)
    spec = PruneSpec(method, sparsity, n, m, groups, timestep_weighting, w_min, w_max, structure=structure)
    dense = trained_dit(ctx.fitter, dit, checkpoint)
    judge_net = trained_classifier(ctx.fitter, dit, classifier)
    ref = reference(dense, judge_net, eval_samples, steps, guidance)
    dense_metrics, _ = judge(dense, ref, judge_net)
    model, report = pruned_copy(
        dense, spec, n_calibration, calibration_seed, steps, guidance, tuple(patterns) if patterns else None
    )
    metrics, images = judge(model, ref, judge_net)
    save_dit(model, ctx.output_dir / "pruned")
    layers = [{"layer": name, "reconstruction_error": error} for name, error in report.layer_error.items()]
    return {
        "metrics": {
            **metrics,
            **{f"dense/{k}": v for k, v in dense_metrics.items()},
            "sparsity": report.sparsity,
            "prune_seconds": report.seconds,
            "calibration_passes": report.passes,
            "parameters": sum(p.numel() for p in model.parameters()),
            "dense_parameters": sum(p.numel() for p in dense.parameters()),
            "flops_per_eps": eps_flops(model, ref.images.shape[-1], guidance),
            "dense/flops_per_eps": eps_flops(dense, ref.images.shape[-1], guidance),
        },
        "tables": {"layers": layers} if layers else {},
        "figures": {"samples": sample_grid({"dense": ref.images, f"{method} {sparsity:.0%}": images})},
    }
