"""The prune task end to end on a tiny, briefly trained DiT: metrics, the saved diffusers model, errors."""

from __future__ import annotations

import functools

import pytest
import torch

from litlab.core.errors import ConfigError
from litlab.methods.obsdiff.dit import DiTDiffusion, load_dit
from litlab.methods.obsdiff.study import arm_cells
from litlab.methods.obsdiff.targets import DEFAULT_DIT, dit_cache_key
from litlab.methods.obsdiff.tasks import parse_nm, prune
from litlab.task import TaskContext

TINY = {"num_layers": 2, "train_steps": 20, "n_train": 512}
FAST = {"dit": TINY, "classifier": {"train_steps": 20}, "eval_samples": 16, "n_calibration": 8, "steps": 5}


def test_prune_task_reports_metrics_and_saves_a_loadable_diffusers_model(tmp_path) -> None:
    out = prune(TaskContext.local(tmp_path), method="obs", nm="2:4", **FAST)
    metrics = out["metrics"]
    assert metrics["sparsity"] == pytest.approx(0.5) and metrics["calibration_passes"] == 4
    assert metrics["dense/image_mse"] == 0 and metrics["image_mse"] > 0
    assert metrics["flops_per_eps"] == metrics["dense/flops_per_eps"] > 0  # masks do not remove FLOPs
    assert {"class_acc", "kid", "eps_mse_early", "eps_mse_late", "psnr"} <= set(metrics)
    loaded = load_dit(tmp_path / "pruned")
    weight = loaded.transformer_blocks[0].ff.net[2].weight
    assert ((weight == 0).reshape(weight.shape[0], -1, 4).sum(-1) == 2).all()
    assert torch.isfinite(weight).all() and "samples" in out["figures"]


def test_structured_task_removes_neurons_and_heads(tmp_path) -> None:
    out = prune(TaskContext.local(tmp_path), method="obs_structured", sparsity=0.25, structure="both", **FAST)
    assert out["metrics"]["parameters"] < out["metrics"]["dense_parameters"]
    assert 0 < out["metrics"]["flops_per_eps"] < out["metrics"]["dense/flops_per_eps"]
    block = load_dit(tmp_path / "pruned").transformer_blocks[1]
    assert block.ff.net[2].in_features == 192 and block.attn1.heads == 3


def test_bad_inputs_are_one_line_config_errors(tmp_path) -> None:
    ctx = TaskContext.local(tmp_path)
    with pytest.raises(ConfigError, match="matches no nn.Linear"):
        prune(ctx, patterns=["transformer_blocks.*.attn2.to_q"], **FAST)
    with pytest.raises(ConfigError, match="not a folder"):
        prune(ctx, checkpoint=str(tmp_path / "missing"), **FAST)
    with pytest.raises(ConfigError, match="unknown dit keys"):
        prune(ctx, **{**FAST, "dit": {"layers": 3}})
    with pytest.raises(ConfigError, match="removes 4 of the 4 heads"):
        prune(ctx, method="l1_structured", sparsity=0.99, structure="heads", **FAST)
    with pytest.raises(ConfigError, match="'2:4'"):
        parse_nm("2-4")
    with pytest.raises(ConfigError, match="unknown dit lr_schedule"):
        prune(ctx, **{**FAST, "dit": {**TINY, "lr_schedule": "step"}})


def test_lr_schedule_steps_every_step_and_keys_the_cache_unless_constant() -> None:
    schedule = functools.partial(torch.optim.lr_scheduler.LambdaLR, lr_lambda=lambda step: 0.5)
    module = DiTDiffusion(functools.partial(torch.optim.AdamW, lr=1e-3), num_layers=1, scheduler=schedule)
    module.bind_data({"image_size": 8, "channels": 3, "n_classes": 2})
    configured = module.configure_optimizers()
    assert configured["lr_scheduler"]["interval"] == "step"
    assert configured["optimizer"].param_groups[0]["lr"] == pytest.approx(5e-4)
    assert "lr_schedule" not in dit_cache_key(DEFAULT_DIT)  # the studies' cached DiTs stay valid
    assert dit_cache_key({**DEFAULT_DIT, "lr_schedule": "warmup_cosine"})["lr_schedule"] == "warmup_cosine"


def test_study_arms_run_at_the_study_sparsities_or_at_their_own() -> None:
    arms = {
        "obs": {"method": "obs"},
        "wanda_2of4": {"method": "wanda", "nm": "2:4"},
        "l1_heads": {"method": "l1_structured", "structure": "heads", "sparsity": 0.25},
    }
    cells = arm_cells(arms, [0.5, 0.7])
    assert [(sparsity, arm) for sparsity, arm, _ in cells] == [
        (0.25, "l1_heads"),
        (0.5, "obs"),
        (0.5, "wanda_2of4"),
        (0.7, "obs"),
    ]
    nm, heads = cells[2][2], cells[0][2]
    assert (nm.method, nm.n, nm.m) == ("wanda", 2, 4) and (heads.structure, heads.sparsity) == ("heads", 0.25)
