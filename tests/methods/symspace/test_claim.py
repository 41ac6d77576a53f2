"""Claim check on a problem whose latent symmetric space is known (the sphere S² = SO(3)/SO(2)).

The full CartanFM (projection Cartan loss, the poster's GSC sign), its own ablations (Cartan term off, GSC
off), FM-only and a VAE are trained with the study's setting (``litlab-run task=symspace/study``: MLP width
128, 600 Adam steps at 3e-3, early stopping on in-distribution validation) on seed 4, which neither chose the
setting (seed 0) nor is one of the study's seeds (1-3). What the study measured (seeds 1/2/3, then seed 4):
- max Cartan residual: full 0.004/0.000/0.000/0.001; Cartan term off 0.91/0.99/0.98/1.00; FM-only
  0.90/0.99/0.95/1.00 (the code's orthogonality form: 0.88/1.00/0.97).
- mirror −X decoded vs the true held-out observation (squared error): FM-only − full = +0.87/+1.18/+0.79/
  +0.71 (mean 0.89, sd 0.21: margin 0.3); Cartan term off − full = +0.13/+0.91/+0.59/+0.48 (smallest 0.13:
  margin 0); GSC off − full = +0.82/+0.77/−0.12/−0.29 (no consistent effect: not asserted).
- share of mirrors read back on held-out factors: full 0.36/0.75/0.57/0.50 vs VAE 0.14/0.18/0.13/0.19
  (smallest gap 0.22: margin 0.1).
- held-out error: full − FM-only = +0.08/+0.01/−0.01/−0.03 (sd 0.05): the terms do not lower it; asserted
  as |difference| < 0.2.
"""

from __future__ import annotations

import pytest

from litlab.datamodules.symmetric_space import symmetric_space_data
from litlab.methods.symspace.synthetic import run_arm

SEED = 4
ARMS = ("cartanfm", "no_cartan", "no_gsc", "fm_only", "vae")


@pytest.fixture(scope="module")
def measured() -> dict[str, dict[str, float]]:
    data = symmetric_space_data()
    results = {arm: run_arm(arm, data, seed=SEED, steps=600) for arm in ARMS}
    print({arm: {k: round(v, 4) for k, v in r.items()} for arm, r in results.items()})
    return results


@pytest.mark.slow
def test_the_cartan_term_makes_the_learnt_bases_a_non_abelian_cartan_pair(measured) -> None:
    full = measured["cartanfm"]
    assert full["cartan_residual_max"] < 0.05, full
    assert full["commutator_ratio_pp"] > 0.1 and full["span_overlap"] < 0.05, full
    for arm in ("no_cartan", "fm_only"):
        assert measured[arm]["cartan_residual_max"] > 0.3, (arm, measured[arm])


@pytest.mark.slow
def test_the_learnt_structure_sends_the_mirror_towards_the_held_out_observations(measured) -> None:
    full = measured["cartanfm"]["mirror_mse"]
    assert full < measured["fm_only"]["mirror_mse"] - 0.3, measured
    assert full < measured["no_cartan"]["mirror_mse"], measured
    assert measured["cartanfm"]["mirror_in_heldout"] > measured["vae"]["mirror_in_heldout"] + 0.1, measured


@pytest.mark.slow
def test_the_structure_terms_do_not_lower_held_out_error(measured) -> None:
    gap = measured["cartanfm"]["heldout_mse"] - measured["fm_only"]["heldout_mse"]
    assert abs(gap) < 0.2, measured
