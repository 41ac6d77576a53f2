"""The study task at a tiny size: every arm and baseline per seed, seed-level intervals, verdicts that
follow the intervals, and the tables the README quotes."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
import torch
from hydra.utils import instantiate
from scipy import stats

from litlab.core.errors import ConfigError
from litlab.core.results import table_rows
from litlab.methods.deepweightflow.study import Claim, interval
from litlab.task import TaskContext


def test_interval_is_the_t_interval() -> None:
    values = [0.2, 0.5, 0.4, 0.9]
    mean, half = interval(values)
    low, high = stats.t.interval(0.95, 3, loc=mean, scale=stats.sem(values))
    assert mean == pytest.approx(0.5) and half == pytest.approx((high - low) / 2)
    assert interval([0.3]) == (pytest.approx(0.3), 0.0)


def test_verdicts_follow_the_interval() -> None:
    def frame(diffs: list[float]) -> pd.DataFrame:
        rows = [
            {"seed": s, "set": "m", "acc_mean": 0.5 + d, "zoo_acc_mean": 1.0} for s, d in enumerate(diffs)
        ]
        rows += [{"seed": s, "set": "b", "acc_mean": 0.5, "zoo_acc_mean": 1.0} for s in range(len(diffs))]
        return pd.DataFrame(rows)

    claim = Claim("c", "p", "m", "b", "acc_mean")
    assert claim.row(frame([0.1, 0.12, 0.11]))["verdict"] == "reproduced"
    assert claim.row(frame([-0.1, -0.12, -0.11]))["verdict"] == "not reproduced"
    assert claim.row(frame([0.1, -0.1, 0.01]))["verdict"] == "no measured difference"
    ratio = Claim("c", "p", "m", None, "acc_mean", above=0.4).row(frame([0.1, 0.12, 0.11]))
    assert ratio["ours"] == pytest.approx(0.61) and ratio["verdict"] == "reproduced"
    wide = Claim("c", "p", "m", None, "acc_mean", above=0.6).row(frame([0.1, 0.12, 0.11]))
    assert wide["verdict"] == "undecided (interval contains 0.6)"


def test_study_runs_every_arm_and_baseline(compose_config, tmp_path: Path) -> None:
    cfg = compose_config(
        "run",
        [
            "task=deepweightflow/study",
            "task.seeds=[0,1]",
            "task.arch=mlp_4_16_3",
            "task.dataset=iris",
            "task.n_networks=10",
            "task.n_train=7",
            "task.zoo_epochs=5",
            "task.zoo_batch_size=16",
            "task.steps=10",
            "task.hidden=16",
            "task.n_generate=4",
            "task.sample_points=5",
            "task.solvers=[[euler,3]]",
            "+task.arms.ddpm.timesteps=20",
        ],
    )
    torch.manual_seed(0)
    output = instantiate(cfg.task)(TaskContext.local(tmp_path))
    per_seed = pd.DataFrame(table_rows(output["tables"]["per_seed"]))
    arms = {"flow", "flow_raw", "flow_unit_source", "ddpm"}
    baselines = {"heldout_real", "nearest_copy", "noise_added", "interpolation_matched", "interpolation"}
    assert arms | baselines == set(per_seed["set"]) and len(per_seed) == 2 * 9
    assert (per_seed.loc[per_seed.set == "nearest_copy", "nn_dist_mean"] == 0).all()
    assert (per_seed.loc[per_seed.set == "interpolation", "seg_dist_mean"] < 1e-4).all()
    summary = {r["set"]: r for r in table_rows(output["tables"]["summary"])}
    flow = per_seed[per_seed.set == "flow"]["acc_mean"]
    assert summary["flow"]["acc_mean"] == pytest.approx(flow.mean()) and summary["flow"]["seeds"] == 2
    verdicts = table_rows(output["tables"]["paper_vs_ours"])
    claims = {r["claim"] for r in verdicts}
    assert {"canonicalisation helps (accuracy)", "canonicalisation helps (worst network)"} <= claims
    assert "flow at least as accurate as a 1000-step DDPM on the same backbone (accuracy)" in claims
    labels = ("reproduced", "not reproduced", "no measured difference", "undecided (interval contains 0.98)")
    assert {r["verdict"] for r in verdicts} <= set(labels)
    assert [r["solver"] for r in table_rows(output["tables"]["solvers"])] == ["rk4-5", "euler-3"]
    assert "novelty" in output["figures"] and output["metrics"]["flow/seeds"] == 2


def test_study_rejects_unknown_arms(compose_config, tmp_path: Path) -> None:
    cfg = compose_config("run", ["task=deepweightflow/study", "+task.arms.gan={kind:gan}"])
    with pytest.raises(ConfigError, match="kind: flow or ddpm"):
        instantiate(cfg.task)(TaskContext.local(tmp_path))
