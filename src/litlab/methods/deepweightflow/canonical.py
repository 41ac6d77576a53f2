"""Stage 2: canonicalise a zoo by permuting every member onto a reference member (left unchanged):
Git Re-Basin weight matching for MLPs/CNNs, TransFusion for attention networks."""

from __future__ import annotations

import logging
from pathlib import Path

import torch

from litlab.core.results import TaskOutput
from litlab.datamodules.weights import Zoo, load_zoo, save_zoo
from litlab.methods.deepweightflow.rebasin import apply_permutation, spec_for, weight_matching
from litlab.methods.deepweightflow.transfusion import transfusion_align
from litlab.task import TaskContext

log = logging.getLogger("litlab")
Params = dict[str, torch.Tensor]


def align_params(arch: dict, reference: Params, params: Params, seed: int = 0) -> Params:
    """One network (no zoo axis) permuted onto ``reference``; its function is unchanged."""
    if arch["name"] == "vit":
        return transfusion_align(reference, params, heads=arch.get("heads", 2))
    spec = spec_for(arch)
    perms, _ = weight_matching(spec, reference, params, seed=seed)
    return apply_permutation(spec, perms, params)


def align_zoo(zoo: Zoo, reference: int = 0) -> Zoo:
    """Every member aligned to member ``reference`` (one LAP problem set per member)."""
    ref = {k: v[reference] for k, v in zoo.params.items()}
    aligned = [
        align_params(zoo.arch, ref, {k: v[i] for k, v in zoo.params.items()}, seed=i) for i in range(len(zoo))
    ]
    params = {k: torch.stack([a[k] for a in aligned]) for k in zoo.params}
    return Zoo(params, zoo.arch, zoo.dataset, zoo.seeds, zoo.accuracy, True, reference, dict(zoo.extra))


def canonicalise_task(ctx: TaskContext, zoo_dir: str, reference: int = 0) -> TaskOutput:
    """Read a zoo, align it to member ``reference`` and write it to ``<output_dir>/zoo``; reports how much
    closer the members came to the reference (mean L2 distance before/after)."""
    output_dir = ctx.output_dir
    zoo = load_zoo(zoo_dir)
    aligned = align_zoo(zoo, reference)
    save_zoo(aligned, Path(output_dir) / "zoo")

    def mean_distance(z: Zoo) -> float:
        flat = torch.cat([v.flatten(1) for v in z.params.values()], 1)
        return float((flat - flat[reference]).norm(dim=1).sum() / (len(z) - 1))

    results = {"distance_before": mean_distance(zoo), "distance_after": mean_distance(aligned)}
    log.info("canonicalised %d networks onto member %d: %s", len(zoo), reference, results)
    return {"metrics": results}
