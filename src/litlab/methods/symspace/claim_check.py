"""The sprite claim decided case by case: CartanFM against the VAE (the paper's claim) and against FM-only
(what the symmetric-space terms add to the flow-matching decoder), as the seed-paired difference of held-out
BCE with its 95 % Student-t interval, beside the same difference in the poster's numbers.

Run:  python -m litlab.methods.symspace.claim_check <run folder or runs.csv> ...
      (a fit in a later table replaces the same split, case, model and seed in an earlier one: a refit)
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

from litlab.methods.symspace.study import REFERENCE, paired, verdict

# The poster's dSprites held-out reconstruction error (BCE per image; its cases c1-c3 are our cases 0-2);
# FM-only from its ablation. β-VAE has no number there.
PAPER_HELDOUT_BCE = {
    ("r2e", "cartanfm"): (2.21, 1.10, 2.49),
    ("r2r", "cartanfm"): (7.02, 9.57, 5.87),
    ("r2e", "vae"): (7.25, 8.08, 14.96),
    ("r2r", "vae"): (28.81, 34.64, 28.90),
    ("r2e", "fm_only"): (1.87, 1.89, 4.52),
    ("r2r", "fm_only"): (29.06, 23.70, 10.40),
}
VERSUS = ("vae", "fm_only")


def claim_check(fits: pd.DataFrame) -> pd.DataFrame:
    """One row per split, case and model CartanFM is set against, from fits with columns split, case, model,
    seed and heldout_bce: differences are versus − CartanFM (positive: CartanFM lower), paired over the seeds
    both have; the poster's from its table."""
    rows = []
    for (split, case), cell in fits.groupby(["split", "case"], sort=True):
        arms = cell.rename(columns={"model": "arm"})
        for versus in VERSUS:
            shared = set(arms.seed[arms.arm == REFERENCE]) & set(arms.seed[arms.arm == versus])
            if not shared:
                continue
            difference, half_width, _ = paired(arms[arms.seed.isin(shared)], versus, "heldout_bce")
            paper = PAPER_HELDOUT_BCE[(split, versus)][case] - PAPER_HELDOUT_BCE[(split, REFERENCE)][case]
            rows.append(
                {
                    "split": split,
                    "case": int(case),
                    "versus": versus,
                    "paper (versus − cartanfm)": f"{paper:+.2f}",
                    "ours (versus − cartanfm)": f"{difference:+.1f}"
                    + (f" ± {half_width:.1f}" if len(shared) > 1 else ""),
                    "seeds": len(shared),
                    "verdict": verdict(difference, half_width, lower_better=True),
                }
            )
    return pd.DataFrame(rows)


def runs_table(path: Path) -> Path:
    """A sprite-claim run folder's ``tables/runs.csv``, or ``path`` itself when it names a file."""
    return path / "tables" / "runs.csv" if path.is_dir() else path


def read_fits(tables: list[Path]) -> pd.DataFrame:
    """The fits of sprite-claim runs (their ``tables/runs.csv``, or the files named), later tables replacing
    the same split, case, model and seed of earlier ones."""
    frames = [pd.read_csv(runs_table(path)) for path in tables]
    fits = pd.concat(frames, ignore_index=True)
    fits = fits[fits["model"] != "data"]
    return fits.drop_duplicates(["split", "case", "model", "seed"], keep="last", ignore_index=True)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("tables", nargs="+", type=Path)
    tables = parser.parse_args().tables
    missing = [str(path) for path in tables if not runs_table(path).is_file()]
    if missing:
        parser.exit(1, f"claim_check: no runs table at {', '.join(missing)}\n")
    check = claim_check(read_fits(tables))
    print(
        check.to_string(index=False) if not check.empty else "no case has CartanFM beside the VAE or FM-only"
    )


if __name__ == "__main__":
    main()
