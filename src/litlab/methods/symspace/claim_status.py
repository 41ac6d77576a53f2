"""Where a sprite-claim study stands, read from its run folders without touching them: every fit that is
saved (its steps, kept step and held-out BCE) and every fit started, or continued past its old cap, but not
saved (its step and best validation so far; it continues when the study is run again); then the saved fits'
held-out BCE per case and model, mean ± sd over seeds, and CartanFM set against the VAE and FM-only case by
case (seed-paired differences with their 95 % intervals, the verdict the finished study will publish).

Run:  python -m litlab.methods.symspace.claim_status [folder ...]
      (default: results/symspace/sprite_claim_32px_study, where the 32x32 CPU study keeps its fits;
      a folder is one holding a fits/ folder, such as a run folder, or one holding such folders)
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pandas as pd
import torch

from litlab.core.stats import format_mean_sd
from litlab.methods.symspace.claim_check import claim_check
from litlab.methods.symspace.fit_protocol import fit_markers

DEFAULT = Path("results/symspace/sprite_claim_32px_study")


def fit_states(fits_dir: Path) -> list[dict]:
    """One row per fit in a case's ``fits/<split>_case<n>/`` folder: saved (``done``, or ``capped`` where it
    reached max_steps and kept its state, so a larger max_steps continues it), ``continuing`` (capped, then
    trained past that cap and not saved again yet) or ``started`` (not saved yet: training now, or continuing
    when the study runs again). Unsaved fits show their checkpoint's step and best validation."""
    rows = []
    for marker in fit_markers(fits_dir):
        row = json.loads(marker.read_text())
        checkpoint = marker.with_suffix(".ckpt")
        loop = _loop(checkpoint) if checkpoint.is_file() else None
        if loop is not None and loop["step"] > row["steps"]:
            rows.append(_unsaved_row(fits_dir, marker.stem, "continuing", loop))
            continue
        state = "capped" if loop is not None else "done"
        saved = (row["steps"], row["kept_step"], row.get("id_bce"), row.get("heldout_bce"))
        rows.append(_row(fits_dir, marker.stem, state, *saved))
    for checkpoint in sorted(fits_dir.glob("*_seed*.ckpt")):
        if not checkpoint.with_suffix(".json").is_file():
            rows.append(_unsaved_row(fits_dir, checkpoint.stem, "started", _loop(checkpoint)))
    return rows


def _loop(checkpoint: Path) -> dict:
    """The training-loop state (step, best_step, best_value, ...) saved in a fit's checkpoint."""
    return torch.load(checkpoint, map_location="cpu", weights_only=True)["loop"]


def _unsaved_row(fits_dir: Path, stem: str, state: str, loop: dict) -> dict:
    """A status row of a fit known from its checkpoint only: step and best validation, no held-out score."""
    return _row(fits_dir, stem, state, loop["step"], loop["best_step"], loop["best_value"])


def _row(
    fits_dir: Path,
    stem: str,
    state: str,
    step: int,
    kept: int | None,
    best: float | None,
    heldout: float | None = None,
) -> dict:
    """A status row of the fit ``<model>_seed<s>`` in ``fits_dir``."""
    model, seed = stem.rsplit("_seed", 1)
    return {
        "case": fits_dir.name,
        "model": model,
        "seed": int(seed),
        "state": state,
        "step": step,
        "kept_step": kept,
        "val_id_bce": best,
        "heldout_bce": heldout,
    }


def study_status(folders: list[Path]) -> pd.DataFrame:
    """Status rows of every fit under ``folders`` (run folders or folders of run folders)."""
    fits_dirs = sorted(
        {fits for folder in folders for fits in folder.glob("**/fits/*_case*") if fits.is_dir()}
    )
    if not fits_dirs:
        raise FileNotFoundError(f"no sprite-claim fits under {', '.join(map(str, folders))}")
    rows = pd.DataFrame([row for fits_dir in fits_dirs for row in fit_states(fits_dir)])
    return rows.sort_values(["case", "seed"], kind="stable", ignore_index=True)


MODEL_ORDER = ("vae", "beta_vae", "fm_only", "cartanfm")


def heldout_summary(status: pd.DataFrame) -> pd.DataFrame:
    """Held-out BCE of the saved fits as ``mean ± sd (seeds)``, one row per case, one column per model."""
    saved = status.dropna(subset=["heldout_bce"])
    cells = saved.groupby(["case", "model"])["heldout_bce"].agg(
        lambda v: f"{format_mean_sd(v, 1)} ({len(v)})"
    )
    table = cells.unstack("model").fillna("–")
    return table[sorted(table.columns, key=lambda m: (MODEL_ORDER + (m,)).index(m))]


def saved_fits(status: pd.DataFrame) -> pd.DataFrame:
    """The saved fits of ``status`` with their case folder's name split into ``split`` and ``case``."""
    saved = status.dropna(subset=["heldout_bce"])
    names = saved["case"].str.extract(r"^(?P<split>.+)_case(?P<number>\d+)$")
    return saved.assign(split=names["split"], case=names["number"].astype(int))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("folders", nargs="*", type=Path, default=[DEFAULT])
    try:
        status = study_status(parser.parse_args().folders)
    except FileNotFoundError as error:
        parser.exit(1, f"claim_status: {error}\n")
    print(status.round(2).to_string(index=False, na_rep="-"))
    counts = status["state"].value_counts()
    states = ("done", "capped", "continuing", "started")
    print(", ".join(f"{counts.get(state, 0)} {state}" for state in states))
    print("\nheld-out BCE of the saved fits, mean ± sd (seeds):")
    print(heldout_summary(status).to_string())
    check = claim_check(saved_fits(status))
    if not check.empty:
        print("\nCartanFM against the VAE and FM-only, paired over the seeds both have:")
        print(check.to_string(index=False))


if __name__ == "__main__":
    main()
