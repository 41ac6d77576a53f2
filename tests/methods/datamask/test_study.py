"""The DATAMASK study task end to end at a tiny size: every selector and LM arm in its tables."""

from __future__ import annotations

from pathlib import Path

from litlab.methods.datamask.study import LM_ARMS, study
from litlab.task import TaskContext


def test_the_study_reports_every_selector_and_lm_arm_over_seeds(tmp_path: Path) -> None:
    out = study(
        TaskContext.local(tmp_path),
        seeds=[100, 101],
        lm_seeds=[100],
        n_documents=400,
        steps=3,
        vocab_size=300,
        block_size=16,
        batch_size=4,
        lm_steps=2,
        lm_eval_every=2,
        hidden_size=16,
    )
    selection = {row["selector"]: row for row in out["tables"]["selectors"]}
    assert {"datamask", "greedy", "topk_quality", "random"} <= set(selection)
    assert " ± " in selection["datamask"]["objective"]  # two pools: mean ± sd
    lm = {row["subset"]: row for row in out["tables"]["lm"]}
    assert set(lm) == set(LM_ARMS.values())
    assert " ± " not in lm["random"]["mean_bpb"]  # one LM seed: the mean alone
    assert out["metrics"]["lm_seeds"] == 1.0 and out["metrics"]["speedup_vs_greedy"] > 0
