"""The pruning driver on a tiny untrained diffusers DiT: selection, packages, groups, hooks, structured
removal, diffusers save/load."""

from __future__ import annotations

import pytest
import torch

from litlab.core.errors import ConfigError
from litlab.methods.obsdiff.dit import build_dit, load_dit, predict_eps, sample, save_dit
from litlab.methods.obsdiff.obs import HessianAccumulator
from litlab.methods.obsdiff.pipeline import calibrator
from litlab.methods.obsdiff.prune import (
    DIT_PATTERNS,
    PruneSpec,
    _hooked_hessians,
    packages,
    prune_model,
    select_linears,
    split_groups,
)
from litlab.methods.obsdiff.structured import obs_remove_columns, remove_ffn_neurons


@pytest.fixture
def dit() -> torch.nn.Module:
    torch.manual_seed(0)
    model = build_dit(image_size=8, n_classes=4, num_layers=2, num_heads=2, head_dim=8, patch_size=2)
    for p in model.parameters():  # adaLN-zero starts every block as the identity: give it real weights
        p.data.normal_(0, 0.2)
    return model.eval()


def test_patterns_select_linears_and_a_dead_pattern_is_one_line_error(dit) -> None:
    layers = select_linears(dit, DIT_PATTERNS)
    assert len(layers) == 2 * 6
    with pytest.raises(ConfigError, match=r"pattern 'blocks\.\*\.attn2\.to_q' matches no nn.Linear"):
        select_linears(dit, ["blocks.*.attn2.to_q"])


def test_parallel_layers_share_a_package_and_groups_are_contiguous(dit) -> None:
    found = packages(list(select_linears(dit, DIT_PATTERNS)))
    assert found[0] == [f"transformer_blocks.0.attn1.to_{x}" for x in "qkv"]
    assert len(found) == 8 and all(len(p) == 1 for p in found[1:4])
    groups = split_groups(found, 4)
    assert [len(g) for g in groups] == [4, 2, 4, 2] and sum(groups, []) == sum(found, [])
    assert len(split_groups(found, 100)) == 8


def test_hooks_accumulate_the_weighted_hessian_of_every_call(dit) -> None:
    """The hooked Hessian equals one built by hand from the layer's inputs and the step weights."""
    layer_name = "transformer_blocks.1.ff.net.2"
    layer = dit.get_submodule(layer_name)
    calls: list[tuple[int, torch.Tensor]] = []
    step = {"i": 0}
    handle = layer.register_forward_hook(lambda m, i, o: calls.append((step["i"], i[0].clone())))
    noise, labels = torch.randn(3, 3, 8, 8), torch.tensor([0, 1, 2])
    sample(dit, noise, labels, 4, 1.5, on_step=lambda i: step.update(i=i))
    handle.remove()
    weights = torch.tensor([1.3, 1.1, 0.9, 0.7])
    by_hand = HessianAccumulator(layer.in_features)
    for index, x in calls:
        by_hand.add(x, float(weights[index]))
    hooked = _hooked_hessians(
        {layer_name: layer}, lambda on_step: sample(dit, noise, labels, 4, 1.5, on_step), weights
    )
    assert len(calls) == 4 and calls[0][1].shape[0] == 6  # 4 steps; the CFG duplicate doubles the batch
    torch.testing.assert_close(hooked[layer_name].hessian, by_hand.hessian)


@pytest.mark.parametrize("method", ["obs", "wanda", "magnitude"])
def test_unstructured_pruning_reaches_the_sparsity_and_runs(dit, method: str) -> None:
    spec = PruneSpec(method=method, sparsity=0.5, groups=2)
    report = prune_model(dit, calibrator(dit, 4, 0, 3, 1.5), 3, spec)
    assert report.sparsity == pytest.approx(0.5, abs=0.01)
    assert report.passes == (0 if method == "magnitude" else 2)
    out, _ = sample(dit, torch.randn(2, 3, 8, 8), torch.tensor([0, 3]), 3)
    assert out.isfinite().all()


def test_nm_pruning_of_the_model_has_two_zeros_in_every_four(dit) -> None:
    prune_model(dit, calibrator(dit, 4, 0, 3, 1.0), 3, PruneSpec(sparsity=0.0, n=2, m=4, groups=1))
    for layer in select_linears(dit, DIT_PATTERNS).values():
        assert ((layer.weight == 0).reshape(layer.out_features, -1, 4).sum(-1) == 2).all()


def test_single_column_removal_is_the_least_squares_optimum() -> None:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(200, 6, generator=g, dtype=torch.float64) @ torch.randn(
        6, 6, generator=g, dtype=torch.float64
    )
    weight = torch.randn(3, 6, generator=g, dtype=torch.float64)
    updated, keep = obs_remove_columns(weight, 2 * x.T @ x, 1, damp=0.0)
    gone = sorted(set(range(6)) - set(keep.tolist()))[0]
    best = torch.linalg.lstsq(x[:, keep], x @ weight.T).solution.T
    torch.testing.assert_close(updated[:, keep], best)
    assert (updated[:, gone] == 0).all()


def test_ffn_removal_cuts_the_right_rows_and_columns(dit) -> None:
    """Cutting neurons equals zeroing their rows of ff.net.0.proj: GELU(0)=0 feeds nothing into ff.net.2."""
    ff = dit.transformer_blocks[0].ff
    inner = ff.net[2].in_features
    keep = torch.arange(0, inner, 2)
    up, down = ff.net[0].proj.weight.detach().clone(), ff.net[2].weight.detach().clone()
    x = torch.randn(5, 7, up.shape[1])
    masked = ff.net[0].proj
    dropped = torch.ones(inner, dtype=torch.bool)
    dropped[keep] = False
    with torch.no_grad():
        masked.weight[dropped] = 0
        masked.bias[dropped] = 0
        expected = ff(x)
    remove_ffn_neurons(ff, keep)
    torch.testing.assert_close(ff.net[0].proj.weight, up[keep])
    torch.testing.assert_close(ff.net[2].weight, down[:, keep])
    assert ff.net[2].in_features == len(keep)
    torch.testing.assert_close(ff(x), expected)


def test_structured_model_runs_saves_and_loads_in_diffusers_format(dit, tmp_path) -> None:
    report = prune_model(
        dit, calibrator(dit, 4, 0, 3, 1.0), 3, PruneSpec("obs_structured", 0.25, groups=2, chunk=4)
    )
    inner = dit.transformer_blocks[0].ff.net[2].in_features
    assert report.sparsity == pytest.approx(0.25) and inner == 48
    x, t, labels = torch.randn(2, 3, 8, 8), torch.tensor(500), torch.tensor([1, 2])
    before = predict_eps(dit, x, t, labels, 1.0, 4)
    save_dit(dit, tmp_path / "pruned")
    assert (tmp_path / "pruned" / "config.json").exists()
    loaded = load_dit(tmp_path / "pruned").eval()
    assert loaded.transformer_blocks[1].ff.net[0].proj.out_features == 48
    torch.testing.assert_close(predict_eps(loaded, x, t, labels, 1.0, 4), before)


def test_structured_pruning_rejects_nm() -> None:
    with pytest.raises(ConfigError, match="N:M"):
        PruneSpec("obs_structured", n=2, m=4)
    with pytest.raises(ConfigError, match="unknown pruning method"):
        PruneSpec("sparsegpt2")
