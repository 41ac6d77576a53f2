"""OBS-Diff's math against closed forms: timestep weights, the Hessian, the OBS update, N:M masks."""

from __future__ import annotations

import math

import pytest
import torch

from litlab.core.errors import ConfigError
from litlab.methods.obsdiff.obs import (
    HessianAccumulator,
    magnitude_mask,
    obs_prune,
    reconstruction_error,
    timestep_weights,
    wanda_mask,
)


def correlated_inputs(cols: int, tokens: int, seed: int) -> torch.Tensor:
    """(tokens, cols) inputs with strongly correlated features and uneven scales (where OBS matters)."""
    g = torch.Generator().manual_seed(seed)
    mixing = torch.randn(cols, cols, generator=g) / math.sqrt(cols) + torch.eye(cols)
    scales = torch.logspace(-1, 1, cols)[torch.randperm(cols, generator=g)]
    return (torch.randn(tokens, cols, generator=g) @ mixing) * scales


def test_log_decrease_matches_the_formula_and_runs_from_w_max_to_w_min() -> None:
    w = timestep_weights("log_decrease", 20)
    t = torch.arange(20, dtype=torch.float64)
    torch.testing.assert_close(w, 0.8 + 0.4 * torch.log(20 - t) / math.log(20))
    assert w[0] == pytest.approx(1.2) and w[-1] == pytest.approx(0.8) and (w.diff() < 0).all()
    assert (timestep_weights("uniform", 20) == 1).all()
    assert (timestep_weights("linear_increase", 5).diff() > 0).all()
    torch.testing.assert_close(
        timestep_weights("log_increase", 20), timestep_weights("log_decrease", 20).flip(0)
    )


def test_unknown_schedule_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="unknown timestep weighting"):
        timestep_weights("cosine", 10)


def test_hessian_weights_calls_and_normalises_by_batch_not_tokens() -> None:
    a, b = torch.randn(2, 5, 3), torch.randn(4, 5, 3)
    acc = HessianAccumulator(3)
    acc.add(a, 1.5)
    acc.add(b, 0.5)
    xa, xb = a.reshape(-1, 3).double(), b.reshape(-1, 3).double()
    expected = 2 * (1.5 * xa.T @ xa + 0.5 * xb.T @ xb) / (1.5 * 2 + 0.5 * 4)
    torch.testing.assert_close(acc.hessian, expected)


def test_single_pruned_weight_at_the_first_column_is_the_closed_form_obs_update() -> None:
    """With the smallest weight in column 0, OBS gives δ = −w_q/[H⁻¹]_qq · H⁻¹[:, q] exactly."""
    x = correlated_inputs(8, 200, 0).double()
    hessian = 2 * x.T @ x
    weight = torch.randn(1, 8, dtype=torch.float64) + 3.0
    weight[0, 0] = 1e-3
    pruned, mask = obs_prune(weight, hessian, sparsity=1 / 8, damp=0.0)
    assert mask.sum() == 1 and mask[0, 0]
    inverse = torch.linalg.inv(hessian)
    expected = weight[0] - weight[0, 0] / inverse[0, 0] * inverse[:, 0]
    torch.testing.assert_close(pruned[0], expected)
    # ... and that is the least-squares optimum of the other weights on the calibration inputs.
    best = torch.linalg.lstsq(x[:, 1:], (x @ weight[0]).unsqueeze(1)).solution.squeeze(1)
    torch.testing.assert_close(pruned[0, 1:], best)


def test_single_pruned_weight_anywhere_is_optimal_given_the_columns_before_it() -> None:
    """SparseGPT's column order: the pruned column q updates only columns > q, optimally."""
    x = correlated_inputs(10, 300, 1).double()
    weight = torch.randn(1, 10, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    pruned, mask = obs_prune(weight, 2 * x.T @ x, sparsity=1 / 10, damp=0.0)
    q = int(mask[0].nonzero())
    torch.testing.assert_close(pruned[0, :q], weight[0, :q])
    assert pruned[0, q] == 0
    target = x @ weight[0] - x[:, :q] @ weight[0, :q]
    best = torch.linalg.lstsq(x[:, q + 1 :], target.unsqueeze(1)).solution.squeeze(1)
    torch.testing.assert_close(pruned[0, q + 1 :], best)


@pytest.mark.parametrize("sparsity", [0.5, 0.7])
def test_obs_reconstructs_better_than_wanda_and_magnitude(sparsity: float) -> None:
    x = correlated_inputs(64, 512, 2)
    hessian = 2 * x.T.double() @ x.double()
    weight = torch.randn(32, 64, generator=torch.Generator().manual_seed(2))
    obs, mask = obs_prune(weight, hessian, sparsity, blocksize=16)
    magnitude = weight.masked_fill(magnitude_mask(weight, sparsity), 0)
    wanda = weight.masked_fill(wanda_mask(weight, hessian.diagonal(), sparsity), 0)
    assert mask.float().mean() == pytest.approx(sparsity, abs=1 / (32 * 16)) and (obs[mask] == 0).all()
    arms = {"obs": obs, "obs_mask_only": weight.masked_fill(mask, 0), "wanda": wanda, "magnitude": magnitude}
    errors = {name: reconstruction_error(weight, w, hessian) for name, w in arms.items()}
    # The weight update is what helps: OBS's own mask without the update is worse than with it.
    assert errors["obs"] < errors["obs_mask_only"], errors
    assert errors["obs"] < errors["wanda"] < errors["magnitude"], errors


@pytest.mark.parametrize("method", ["obs", "wanda", "magnitude"])
@pytest.mark.parametrize(("n", "m"), [(2, 4), (1, 4), (4, 8)])
def test_nm_masks_have_exactly_n_zeros_in_every_m(method: str, n: int, m: int) -> None:
    x = correlated_inputs(32, 128, 3)
    hessian = 2 * x.T.double() @ x.double()
    weight = torch.randn(16, 32, generator=torch.Generator().manual_seed(3))
    if method == "obs":
        pruned, _ = obs_prune(weight, hessian, n=n, m=m, blocksize=16)
    elif method == "wanda":
        pruned = weight.masked_fill(wanda_mask(weight, hessian.diagonal(), n=n, m=m), 0)
    else:
        pruned = weight.masked_fill(magnitude_mask(weight, n=n, m=m), 0)
    zeros = (pruned == 0).reshape(16, 32 // m, m).sum(-1)
    assert (zeros == n).all()


def test_wanda_prunes_per_output_row() -> None:
    weight = torch.randn(6, 20)
    mask = wanda_mask(weight, torch.rand(20), 0.25)
    assert (mask.sum(1) == 5).all()


def test_bad_patterns_are_config_errors() -> None:
    weight, hessian = torch.randn(4, 6), torch.eye(6)
    with pytest.raises(ConfigError, match="multiple of M"):
        obs_prune(weight, hessian, n=2, m=4)
    with pytest.raises(ConfigError, match="sparsity must be"):
        obs_prune(weight, hessian, sparsity=1.0)


def test_dead_inputs_are_pruned_and_the_rest_is_finite() -> None:
    x = correlated_inputs(8, 64, 4)
    x[:, 3] = 0
    pruned, _ = obs_prune(torch.randn(4, 8), 2 * x.T.double() @ x.double(), 0.25)
    assert (pruned[:, 3] == 0).all() and pruned.isfinite().all()
