"""The sprite claim's case-by-case verdict: seed-paired differences of held-out BCE, CartanFM against the VAE
and FM-only, decided by their 95 % interval and set beside the poster's."""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd
import pytest

from litlab.methods.symspace.claim_check import claim_check, main, read_fits
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


def test_a_refit_in_a_later_table_replaces_the_same_fit_of_an_earlier_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    first = _fits("r2r", 0, {"cartanfm": [40.0, 41.0], "vae": [50.0, 52.0]})
    data = pd.DataFrame([{"split": "r2r", "case": 0, "model": "data", "seed": 0, "heldout_bce": 0.0}])
    (tmp_path / "run" / "tables").mkdir(parents=True)
    pd.concat([first, data]).to_csv(tmp_path / "run" / "tables" / "runs.csv", index=False)
    _fits("r2r", 0, {"cartanfm": [60.0]}).assign(seed=1).to_csv(tmp_path / "refit.csv", index=False)
    fits = read_fits([tmp_path / "run", tmp_path / "refit.csv"]).set_index(["model", "seed"])["heldout_bce"]
    assert fits.to_dict() == {
        ("cartanfm", 0): 40.0,
        ("cartanfm", 1): 60.0,
        ("vae", 0): 50.0,
        ("vae", 1): 52.0,
    }

    monkeypatch.setattr(sys, "argv", ["claim_check", str(tmp_path / "run"), str(tmp_path / "refit.csv")])
    main()
    assert "+1.0 ± 114.4" in capsys.readouterr().out  # paired: 50 - 40 and 52 - 60
    _fits("r2e", 0, {"vae": [5.0]}).to_csv(tmp_path / "vae_only.csv", index=False)
    monkeypatch.setattr(sys, "argv", ["claim_check", str(tmp_path / "vae_only.csv")])
    main()
    assert capsys.readouterr().out == "no case has CartanFM beside the VAE or FM-only\n"
    monkeypatch.setattr(sys, "argv", ["claim_check", str(tmp_path / "nowhere")])
    with pytest.raises(SystemExit, match="1"):
        main()
    assert "no runs table at" in capsys.readouterr().err
