"""Claim test of the checker ablation: with the checker off, RL on the pipeline's QA learns the wrong facts
that the checker would have removed (README: "What the checker protects: the training facts").

The paper: RL on checked QA does better than on QA made with the checker off. What reproduces here, with
60 % of the generated pairs spoiled: on the training facts whose unchecked QA pair rewards a wrong value,
the arm trained on unchecked QA says that spoiled value more often. Held-out facts (the study's probe) do
not move: spoiled pairs are about training entities only.

Configuration: the claim test's (``test_claim.py``) at noise 0.6, with the study's 50-step SFT warm-up before
50 GRPO steps, as ``sft_grpo`` and ``sft_grpo_no_checker`` run in the study's default version. Without the
warm-up (the paper's way), GRPO rarely samples a spoiled value, so the effect is small and, per seed, not
certain: on seeds 7-14 the spoiled share differs by -0.044 +- 0.028, one seed at 0, and the true share by
+0.073 +- 0.073, one seed below 0. Not asserted.

Calibration (seeds 10-14, `results/webscale_rl/wrong_facts_noise06_sft_warmup/`, 26-34 such facts per
seed): checked - unchecked share of those facts answered with the spoiled value -0.122 +- 0.015 (-0.118 /
-0.125 / -0.107 / -0.147 / -0.115). Margin: mean + 2 sd = -0.092. Seed 7 is neither a study, calibration
nor claim seed; its pretrained model ships in ``data/webscale_rl`` (a cold cache trains it in ~55 s).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from litlab.methods.webscale_rl.study import one_seed
from litlab.task import TaskContext
from tests.methods.webscale_rl.claim_setup import CLAIM, assert_shipped_model_is_read

SEED = 7
CHECKER = CLAIM | {"noise": 0.6, "sft_warmup_steps": 50, "arms": ("sft_grpo", "sft_grpo_no_checker")}


def test_a_cold_cache_reads_the_checker_seeds_shipped_pretrained_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert_shipped_model_is_read(tmp_path, monkeypatch, SEED, CHECKER)


@pytest.fixture(scope="module")
def recall(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, float]]:
    torch.manual_seed(0)
    curves = one_seed(TaskContext.local(tmp_path_factory.mktemp("checker")), SEED, CHECKER)
    return {arm: curves[arm][-1] for arm in CHECKER["arms"]}


@pytest.mark.slow
def test_rl_on_unchecked_qa_says_the_spoiled_training_facts(recall: dict[str, dict[str, float]]) -> None:
    checked, unchecked = recall["sft_grpo"], recall["sft_grpo_no_checker"]
    assert checked["wrong_facts_spoiled"] - unchecked["wrong_facts_spoiled"] <= -0.092
