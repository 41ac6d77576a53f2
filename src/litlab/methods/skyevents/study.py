"""The SkyEvents studies as tasks: GTA against its baselines, and the four reconstruction setups."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
import torch

from litlab.core.figures import save_figure
from litlab.core.progress import track
from litlab.core.results import TaskOutput
from litlab.datamodules.events import FlightConfig, UAVSequence, load_sequence
from litlab.fitting import Fitter
from litlab.methods.skyevents.fitting import fit
from litlab.methods.skyevents.gta import estimate_offset_gta, estimate_offset_xcorr
from litlab.methods.skyevents.objective import EventReconstruction
from litlab.task import TaskContext

# setup: (event loss, which offset, RER's overlap mask); a–d are the paper note's "Test 2", e and f ablate
# RER's mechanism: its overlap mask Ω, and the LiDAR geometry in the GTA offset it reads events at
SETUPS = {
    "a_rgb_only": ("none", None, True),
    "b_full_no_align": ("full", "zero", True),
    "c_full_gta": ("full", "gta", True),
    "d_rer_gta": ("rer", "gta", True),
    "e_rer_no_mask": ("rer", "gta", False),
    "f_rer_gta_flat": ("rer", "gta_flat", True),
}


def held_out(sequence: UAVSequence, every: int = 4) -> tuple[torch.Tensor, torch.Tensor]:
    """Training and held-out frame indices (every ``every``-th frame held out, as the DataModule does)."""
    k = torch.arange(len(sequence.frames))
    held = k % every == every // 2
    return k[~held], k[held]


def gta_table(
    conditions: Sequence[str], offsets: Sequence[float], seeds: Sequence[int], flight: dict | None = None
) -> pd.DataFrame:
    """Absolute offset errors (ms) of GTA, GTA on flat ground, cross-correlation and no alignment.

    Each flight is simulated once (with ``flight``'s planted offset) and its events re-stamped per offset.
    """
    rows = []
    jobs = [(c, s) for c in conditions for s in seeds]
    for condition, seed in track(jobs, description="GTA"):
        base = load_sequence(
            FlightConfig(**{**(flight or {}), "condition": condition, "seed": seed, "time_offset": 0.0})
        )
        for offset in offsets:
            sequence = base.with_offset(offset)
            gta = estimate_offset_gta(sequence).offset
            flat = estimate_offset_gta(sequence, geometry="flat").offset
            xcorr = estimate_offset_xcorr(sequence).offset
            rows.append(
                {
                    "condition": condition,
                    "seed": seed,
                    "offset_ms": 1e3 * offset,
                    "gta_error_ms": 1e3 * abs(gta - offset),
                    "gta_flat_error_ms": 1e3 * abs(flat - offset),
                    "xcorr_error_ms": 1e3 * abs(xcorr - offset),
                    "none_error_ms": 1e3 * abs(offset),
                }
            )
    return pd.DataFrame(rows)


def reconstruct(
    fitter: Fitter,
    sequence: UAVSequence,
    setup: str,
    steps: int,
    event_weights: dict[str, float],
    seed: int = 0,
    gta_offset: float | None = None,
) -> tuple[EventReconstruction, dict[str, float]]:
    """Train one setup of ``SETUPS`` on ``sequence``; PSNR/SSIM on its held-out sharp, well-lit views.

    ``gta_offset``: GTA's (LiDAR) estimate if already computed (otherwise GTA runs when the setup needs it).
    """
    loss, offset_kind, mask = SETUPS[setup]
    offset = 0.0
    if offset_kind == "gta":
        offset = estimate_offset_gta(sequence).offset if gta_offset is None else gta_offset
    elif offset_kind == "gta_flat":
        offset = estimate_offset_gta(sequence, geometry="flat").offset
    objective = EventReconstruction(
        event_loss=loss, event_weight=event_weights.get(loss, 0.0), overlap_mask=mask
    )
    objective.build(sequence, offset)
    train, test = held_out(sequence)
    fit(fitter, objective, sequence, train, steps, seed=seed)
    metrics = {k: float(v) for k, v in objective.evaluate(sequence, test).items()}
    return objective, {**metrics, "offset_ms": 1e3 * offset}


def reconstruction_table(
    fitter: Fitter,
    conditions: Sequence[str],
    setups: Sequence[str],
    seeds: Sequence[int],
    steps: int,
    event_weights: dict[str, float],
    flight: dict | None = None,
    grid_dir: Path | None = None,
) -> pd.DataFrame:
    """PSNR/SSIM of each setup on each flight; with ``grid_dir``, an image grid per flight (seed 0)."""
    rows = []
    for condition in conditions:
        for seed in seeds:
            sequence = load_sequence(FlightConfig(**{**(flight or {}), "condition": condition, "seed": seed}))
            renders = {}
            gta = estimate_offset_gta(sequence).offset
            for setup in track(setups, description=f"{condition} seed {seed}"):
                objective, metrics = reconstruct(fitter, sequence, setup, steps, event_weights, seed, gta)
                rows.append({"condition": condition, "seed": seed, "setup": setup, **metrics})
                renders[setup] = objective
            if grid_dir is not None and seed == seeds[0]:
                save_figure(image_grid(sequence, renders), grid_dir, f"views_{condition}")
    return pd.DataFrame(rows)


@torch.no_grad()
def image_grid(sequence: UAVSequence, objectives: dict[str, EventReconstruction], n_views: int = 3):
    """A figure: captured frames, each setup's render, and the sharp ground truth at held-out views."""
    _, test = held_out(sequence)
    index = test[:n_views]
    rows = [("captured", sequence.frames[index])]
    rows += [
        (name, o.render_rgb(sequence, sequence.frame_times[index]).clamp(0, 1))
        for name, o in objectives.items()
    ]
    rows.append(("ground truth", sequence.sharp_views[index]))
    fig, axes = plt.subplots(
        len(rows), len(index), figsize=(2.2 * len(index), 1.7 * len(rows)), squeeze=False
    )
    for r, (label, images) in enumerate(rows):
        for c, image in enumerate(images):
            axes[r, c].imshow(image.permute(1, 2, 0).numpy())
            axes[r, c].set_xticks([])
            axes[r, c].set_yticks([])
        axes[r, 0].set_ylabel(label, fontsize=8)
    fig.tight_layout()
    return fig


def skyevents_study(
    ctx: TaskContext,
    conditions: Sequence[str] = ("normal", "blur", "low_light"),
    offsets: Sequence[float] = (0.001, 0.005, 0.01, 0.02),
    seeds: Sequence[int] = (0, 1, 2),
    setups: Sequence[str] = tuple(SETUPS),
    steps: int = 200,
    event_weights: dict[str, float] | None = None,
    planted_offset: float = 0.01,
    flight: dict | None = None,
) -> TaskOutput:
    """Run both studies; write ``gta.csv``, ``reconstruction.csv``, ``tables.md`` and image grids."""
    output_dir = ctx.output_dir
    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    weights = dict(event_weights or {"full": 0.006, "rer": 0.0003})
    gta = gta_table(conditions, offsets, seeds, flight)
    recon = reconstruction_table(
        ctx.fitter,
        conditions,
        setups,
        seeds,
        steps,
        weights,
        {**(flight or {}), "time_offset": planted_offset},
        output_dir,
    )
    gta.to_csv(output_dir / "gta.csv", index=False)
    recon.to_csv(output_dir / "reconstruction.csv", index=False)
    gta_summary = gta.groupby(["condition", "offset_ms"])[
        ["gta_error_ms", "gta_flat_error_ms", "xcorr_error_ms", "none_error_ms"]
    ].mean()
    recon_summary = recon.groupby(["condition", "setup"])[["psnr", "ssim"]].mean()
    (output_dir / "tables.md").write_text(
        "## GTA: mean |offset error| (ms)\n\n" + gta_summary.round(3).to_markdown() + "\n\n"
        "## Reconstruction: held-out PSNR (dB) / SSIM\n\n" + recon_summary.round(3).to_markdown() + "\n"
    )
    results = {
        f"gta_error_ms/{c}": float(v) for c, v in gta.groupby("condition")["gta_error_ms"].mean().items()
    }
    results.update({f"psnr/{c}/{s}": float(v) for (c, s), v in recon_summary["psnr"].items()})
    spread = recon.groupby(["condition", "setup"])[["psnr", "ssim"]].agg(["mean", "std", "min", "max"])
    spread.columns = ["_".join(c) for c in spread.columns]
    tables = {
        "gta_errors": gta,
        "gta_summary": gta_summary.reset_index(),
        "reconstruction": recon,
        "reconstruction_seed_spread": spread.reset_index(),
    }
    return {"metrics": results, "tables": tables}
