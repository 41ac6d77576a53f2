"""The sprite claim's case-by-case verdict: seed-paired differences of held-out BCE, CartanFM against the VAE
and FM-only, decided by their 95 % interval and set beside the poster's."""

from __future__ import annotations

import pandas as pd

from litlab.methods.symspace.claim_check import claim_check
from litlab.methods.symspace.claim_status import saved_fits


def _fits(split: str, case: int, heldout: dict[str, list[float]]) -> pd.DataFrame:
    """Rows of saved fits: one per model and seed (seeds 0, 1, ... in list order)."""
    rows = [
        {"split": split, "case": case, "model": model, "seed": seed, "heldout_bce": value}
        for model, values in heldout.items()
        for seed, value in enumerate(values)
    ]
    return pd.DataFrame(rows)


def test_cartanfm_is_called_better_or_worse_only_where_the_paired_interval_excludes_zero() -> None:
    cartanfm = [40.0, 50.0, 60.0]  # a seed spread far larger than the paired differences below
    fits = pd.concat(
        [
            _fits(
                "r2r",
                0,
                {"cartanfm": cartanfm, "vae": [v + 10 + d for v, d in zip(cartanfm, (0.2, -0.3, 0.1))]},
            ),
            _fits("r2r", 0, {"fm_only": [v + d for v, d in zip(cartanfm, (4.0, -5.0, 2.0))]}),
            _fits("r2e", 1, {"cartanfm": [9.0, 8.0, 10.0], "vae": [4.0, 3.5, 4.4]}),
        ]
    )
    check = claim_check(fits).set_index(["split", "case", "versus"])["verdict"].to_dict()
    assert check == {
        ("r2e", 1, "vae"): "CartanFM worse",
        ("r2r", 0, "vae"): "CartanFM better",
        ("r2r", 0, "fm_only"): "no significant difference",
    }


def test_only_seeds_both_models_have_are_paired_and_the_poster_difference_is_versus_minus_cartanfm() -> None:
    fits = pd.concat(
        [
            _fits("r2r", 1, {"vae": [50.0, 44.0, 53.0], "beta_vae": [55.0, 43.0, 43.0]}),
            _fits("r2r", 1, {"cartanfm": [43.0]}).assign(seed=1),  # CartanFM has seed 1 only
            _fits("r2e", 2, {"vae": [30.0, 31.0], "fm_only": [80.0]}),  # no CartanFM: nothing to compare
        ]
    )
    row = claim_check(fits).set_index("versus").loc["vae"]
    assert (row["split"], row["case"], row["seeds"]) == ("r2r", 1, 1)
    assert row["ours (versus − cartanfm)"] == "+1.0" and row["verdict"] == "one seed: no interval"
    assert row["paper (versus − cartanfm)"] == "+25.07"  # the poster's 34.64 - 9.57
    assert len(claim_check(fits)) == 1


def test_the_status_table_names_each_case_folder_by_split_and_case() -> None:
    status = pd.DataFrame(
        {
            "case": ["r2e_case2", "r2r_case0", "r2r_case0"],
            "model": ["vae", "cartanfm", "vae"],
            "seed": [0, 0, 0],
            "heldout_bce": [30.0, None, 50.0],  # the CartanFM fit is not saved yet
        }
    )
    fits = saved_fits(status)
    assert list(zip(fits["split"], fits["case"], fits["model"])) == [("r2e", 2, "vae"), ("r2r", 0, "vae")]
