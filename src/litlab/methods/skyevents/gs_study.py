"""The renderer study: the DEM texture against 3D Gaussians on nadir and oblique flights, sharp and blurred,
RGB only against event supervision, with the least-squares DEM-texture floor of every flight beside them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd

from litlab.core.errors import ConfigError
from litlab.core.progress import track
from litlab.core.results import TaskOutput
from litlab.datamodules.events import FlightConfig, UAVSequence, load_sequence
from litlab.fitting import Fitter
from litlab.methods.skyevents.dem_floor import sequence_floor
from litlab.methods.skyevents.fitting import fit
from litlab.methods.skyevents.gta import estimate_offset_gta
from litlab.methods.skyevents.objective import EventReconstruction
from litlab.methods.skyevents.study import SETUPS, held_out
from litlab.task import TaskContext


def train_renderer(
    fitter: Fitter,
    sequence: UAVSequence,
    renderer: str,
    setup: str,
    options: dict[str, Any],
    steps: int,
    batch_size: int,
    event_weights: dict[str, float],
    seed: int,
    gta_offset: float,
    lr: float = 0.1,
) -> dict[str, float]:
    """Held-out PSNR/SSIM of one renderer trained with one setup of ``SETUPS`` (``lr``: the texture's;
    the Gaussians' groups carry 3DGS's rates)."""
    loss, offset_kind, mask = SETUPS[setup]
    offset = {"gta": gta_offset, "zero": 0.0, None: 0.0}[offset_kind]
    objective = EventReconstruction(
        renderer=renderer,
        event_loss=loss,
        event_weight=event_weights.get(loss, 0.0),
        overlap_mask=mask,
        **options,
    )
    objective.build(sequence, offset)
    train, test = held_out(sequence)
    fit(
        fitter, objective, sequence, train, steps, lr=options.get("lr", 0.1), batch_size=batch_size, seed=seed
    )
    return {k: float(v) for k, v in objective.evaluate(sequence, test).items()}


def renderer_study(
    ctx: TaskContext,
    *,
    seeds: Sequence[int] = (0, 1, 2),
    flights: dict[str, dict] | None = None,
    conditions: Sequence[str] = ("normal", "blur"),
    renderers: dict[str, dict] | None = None,
    setups: Sequence[str] = ("a_rgb_only", "d_rer_gta"),
    event_weights: dict[str, float] | None = None,
) -> TaskOutput:
    """Every flight × condition × seed × renderer × setup; ``renderers`` maps a renderer to its
    ``EventReconstruction`` options plus ``steps``, ``batch_size`` and ``lr`` (sharp frames render one
    pose each, blurred ones ``exposure_samples``). Returns runs, per-arm mean/std and
    the DEM-texture floor of each flight (``dem_floor.sequence_floor``)."""
    unsupported = [s for s in setups if SETUPS.get(s, (None, "gta_flat"))[1] == "gta_flat" or s not in SETUPS]
    if unsupported:
        raise ConfigError(
            f"task.setups: {unsupported} not in a_rgb_only, b_full_no_align, c_full_gta, d_rer_gta"
        )
    weights = dict(event_weights or {"full": 0.006, "rer": 0.0003})
    flights = dict(flights or {"nadir": {}, "oblique": {"oblique": True}})
    renderers = dict(renderers or {"texture": {"steps": 200, "batch_size": 8}})
    rows, floors = [], []
    jobs = [(f, c, s) for f in flights for c in conditions for s in seeds]
    for flight, condition, seed in track(jobs, description="renderer study"):
        sequence = load_sequence(FlightConfig(**{**flights[flight], "condition": condition, "seed": seed}))
        train, test = held_out(sequence)
        floors.append(
            {"flight": flight, "condition": condition, "seed": seed, **sequence_floor(sequence, train, test)}
        )
        needs_gta = any(SETUPS[s][1] == "gta" for s in setups)
        gta = estimate_offset_gta(sequence).offset if needs_gta else 0.0
        for renderer, spec in renderers.items():
            options = {k: v for k, v in spec.items() if k not in ("steps", "batch_size", "lr")}
            if condition == "normal":  # a 2 ms exposure blurs under a pixel: one pose per frame
                options["exposure_samples"] = 1
            for setup in setups:
                metrics = train_renderer(
                    ctx.fitter,
                    sequence,
                    renderer,
                    setup,
                    options,
                    spec["steps"],
                    spec["batch_size"],
                    weights,
                    seed,
                    gta,
                    spec.get("lr", 0.1),
                )
                rows.append(
                    {
                        "flight": flight,
                        "condition": condition,
                        "seed": seed,
                        "renderer": renderer,
                        "setup": setup,
                        **metrics,
                        "offset_ms": 1e3 * gta,
                    }
                )
    runs, floor = pd.DataFrame(rows), pd.DataFrame(floors)
    keys = ["flight", "condition", "renderer", "setup"]
    summary = runs.groupby(keys)[["psnr", "ssim"]].agg(["mean", "std"])
    summary.columns = ["_".join(c) for c in summary.columns]
    summary = summary.reset_index()
    floor_mean = floor.groupby(["flight", "condition"])["psnr"].mean().rename("dem_floor_psnr").reset_index()
    summary = summary.merge(floor_mean, on=["flight", "condition"])
    metrics = {
        f"psnr/{r.flight}/{r.condition}/{r.renderer}/{r.setup}": float(r.psnr_mean)
        for r in summary.itertuples()
    }
    metrics.update(
        {f"dem_floor_psnr/{r.flight}/{r.condition}": float(r.dem_floor_psnr) for r in floor_mean.itertuples()}
    )
    return {"metrics": metrics, "tables": {"summary": summary.round(3), "runs": runs, "dem_floor": floor}}
