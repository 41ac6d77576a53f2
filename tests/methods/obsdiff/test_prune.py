"""The pruning driver on a tiny untrained diffusers DiT: selection, packages, groups, hooks, structured
removal of FFN neurons and attention heads, diffusers save/load."""

from __future__ import annotations

import copy

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
from litlab.methods.obsdiff.structured import l1_keep, obs_remove_columns, remove_ffn_neurons, remove_heads


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


def test_group_removal_is_the_least_squares_optimum_and_picks_the_cheapest_group() -> None:
    """Removing one group of 3 columns (a 'head'): the survivors equal least squares on the calibration
    inputs, and the removed group is the one whose optimal reconstruction error is smallest (brute force)."""
    g = torch.Generator().manual_seed(1)
    x = torch.randn(300, 12, generator=g, dtype=torch.float64) @ torch.randn(
        12, 12, generator=g, dtype=torch.float64
    )
    weight = torch.randn(4, 12, generator=g, dtype=torch.float64)
    target = x @ weight.T

    def best_error(group: int) -> float:
        cols = [c for c in range(12) if c // 3 != group]
        fit = torch.linalg.lstsq(x[:, cols], target).solution
        return float((x[:, cols] @ fit - target).square().sum())

    updated, keep = obs_remove_columns(weight, 2 * x.T @ x, 1, group=3, damp=0.0)
    gone = sorted(set(range(4)) - set(keep.tolist()))[0]
    assert gone == min(range(4), key=best_error)
    cols = torch.tensor([c for c in range(12) if c // 3 != gone])
    torch.testing.assert_close(updated[:, cols], torch.linalg.lstsq(x[:, cols], target).solution.T)
    assert (updated[:, 3 * gone : 3 * gone + 3] == 0).all()
    assert l1_keep(weight, 2, group=3).tolist() == sorted(
        weight.abs().sum(0).reshape(4, 3).sum(1).argsort(descending=True)[:2].tolist()
    )


def _masked_heads(dense: torch.nn.Module, pruned: torch.nn.Module, kept: dict[str, list[int]]) -> None:
    """Turn ``dense`` into the masked twin of ``pruned``: its to_out.0 holds the pruned model's weights in
    the kept heads' columns and zeros in the removed heads' (q/k/v stay dense)."""
    for name, heads in kept.items():
        layer, small = dense.get_submodule(name), pruned.get_submodule(name)
        width = layer.in_features // dense.get_submodule(name.removesuffix(".to_out.0")).heads
        cols = (torch.tensor(heads).unsqueeze(1) * width + torch.arange(width)).flatten()
        with torch.no_grad():
            layer.weight.zero_()
            layer.weight[:, cols] = small.weight
            layer.bias.copy_(small.bias)


@pytest.mark.parametrize("method", ["obs_structured", "l1_structured"])
def test_head_pruned_model_equals_its_masked_twin_and_saves_and_loads(dit, tmp_path, method: str) -> None:
    dense = copy.deepcopy(dit)
    spec = PruneSpec(method, 0.5, groups=2, structure="heads")
    report = prune_model(dit, calibrator(dit, 4, 0, 3, 1.5), 3, spec)
    attention = dit.transformer_blocks[0].attn1
    assert report.sparsity == pytest.approx(0.5) and len(report.kept) == 2
    assert attention.heads == 1 and attention.to_q.out_features == attention.to_v.out_features == 8
    assert attention.to_out[0].in_features == 8 and dit.transformer_blocks[0].ff.net[2].in_features == 64
    for name, heads in report.kept.items():  # the kept heads' q/k/v rows are the dense model's rows
        rows = torch.arange(8 * heads[0], 8 * heads[0] + 8)
        block = name.removesuffix(".to_out.0")
        for proj in ("to_q", "to_k", "to_v"):
            torch.testing.assert_close(
                dit.get_submodule(f"{block}.{proj}").weight,
                dense.get_submodule(f"{block}.{proj}").weight[rows],
            )
    _masked_heads(dense, dit, report.kept)
    x, t, labels = torch.randn(3, 3, 8, 8), torch.tensor(400), torch.tensor([0, 1, 3])
    pruned_eps = predict_eps(dit, x, t, labels, 1.5, 4)
    torch.testing.assert_close(pruned_eps, predict_eps(dense, x, t, labels, 1.5, 4))
    save_dit(dit, tmp_path / "heads")
    loaded = load_dit(tmp_path / "heads").eval()
    assert loaded.transformer_blocks[1].attn1.heads == 1
    torch.testing.assert_close(predict_eps(loaded, x, t, labels, 1.5, 4), pruned_eps)


def test_heads_and_neurons_together_run_save_and_load(dit, tmp_path) -> None:
    spec = PruneSpec("obs_structured", 0.5, groups=4, structure="both")
    report = prune_model(dit, calibrator(dit, 4, 0, 3, 1.0), 3, spec)
    assert report.passes == 4 and len(report.kept) == 4
    block = dit.transformer_blocks[1]
    assert block.attn1.heads == 1 and block.ff.net[2].in_features == 32
    out, _ = sample(dit, torch.randn(2, 3, 8, 8), torch.tensor([0, 3]), 3, 1.5)
    assert out.isfinite().all()
    save_dit(dit, tmp_path / "both")
    loaded = load_dit(tmp_path / "both").eval()
    x, t, labels = torch.randn(2, 3, 8, 8), torch.tensor(100), torch.tensor([2, 3])
    torch.testing.assert_close(
        predict_eps(loaded, x, t, labels, 1.0, 4), predict_eps(dit, x, t, labels, 1.0, 4)
    )


def test_head_removal_cuts_the_right_rows_and_columns(dit) -> None:
    """Physically removing head 0 equals zeroing its value rows: the module still runs on its own."""
    attention = dit.transformer_blocks[0].attn1
    x = torch.randn(2, 5, attention.to_q.in_features)
    with torch.no_grad():
        masked = copy.deepcopy(attention)
        masked.to_v.weight[:8] = 0
        masked.to_v.bias[:8] = 0
        expected = masked(x)
    remove_heads(attention, torch.tensor([1]))
    torch.testing.assert_close(attention(x), expected)
    with pytest.raises(ConfigError, match="cannot remove all 1 heads"):
        remove_heads(attention, torch.tensor([], dtype=torch.long))
    from diffusers.models.attention_processor import Attention

    joint = Attention(query_dim=16, heads=2, dim_head=8, added_kv_proj_dim=16)
    with pytest.raises(ConfigError, match="joint"):
        remove_heads(joint, torch.tensor([0]))


def test_impossible_structured_requests_are_one_line_errors(dit) -> None:
    calibrate = calibrator(dit, 2, 0, 2, 1.0)
    with pytest.raises(ConfigError, match="removes 0 of the 2 heads"):
        prune_model(dit, calibrate, 2, PruneSpec("obs_structured", 0.2, groups=1, structure="heads"))
    with pytest.raises(ConfigError, match=r"must be in \[0, 1\)"):
        PruneSpec("l1_structured", 1.0, structure="heads")
    with pytest.raises(ConfigError, match="unknown structure"):
        PruneSpec("obs_structured", 0.5, structure="layers")
