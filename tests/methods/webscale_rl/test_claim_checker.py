"""Claim test of the checker ablation: GRPO on unchecked QA learns the wrong facts that the checker removes
(README: "What the checker protects: the training facts").

The paper: RL on the checked QA does better than on QA made with the checker off. What reproduces here, at
the claim test's version-4 configuration (GRPO straight from the pretrained model, no SFT warm-up) with 60 %
of the generated pairs spoiled: on the training facts whose unchecked QA pair rewards a wrong value, the
checked arm answers the true value more often, and the unchecked arm says the spoiled value more often.
Held-out facts (the study's probe) do not move: spoiled pairs are about training entities only.

Calibration (seeds 10-14, `results/webscale_rl/wrong_facts_noise06_grpo/`, 26-34 such facts per seed):
checked - unchecked, true value +0.053 +- 0.020 (+0.029 / +0.062 / +0.036 / +0.059 / +0.077); spoiled
value -0.032 +- 0.021 (-0.059 / 0.000 / -0.036 / -0.029 / -0.038). Margins: mean - 2 sd = +0.013 for the
true value, mean + 2 sd = +0.010 for the spoiled value. Seed 7 is neither a study, calibration nor claim
seed; its pretrained model ships in ``data/webscale_rl`` (a cold cache trains it in ~55 s).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from litlab.methods.webscale_rl.study import one_seed
from litlab.task import TaskContext
from tests.methods.webscale_rl.test_claim import CLAIM, assert_shipped_model_is_read

SEED = 7
CHECKER = CLAIM | {"noise": 0.6, "arms": ("sft_grpo", "sft_grpo_no_checker")}


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
def test_grpo_on_unchecked_qa_answers_fewer_spoiled_training_facts_right(
    recall: dict[str, dict[str, float]],
) -> None:
    checked, unchecked = recall["sft_grpo"], recall["sft_grpo_no_checker"]
    assert checked["wrong_facts_true"] - unchecked["wrong_facts_true"] >= 0.013


@pytest.mark.slow
def test_grpo_on_unchecked_qa_says_the_spoiled_value_no_less_often(
    recall: dict[str, dict[str, float]],
) -> None:
    checked, unchecked = recall["sft_grpo"], recall["sft_grpo_no_checker"]
    assert checked["wrong_facts_spoiled"] - unchecked["wrong_facts_spoiled"] <= 0.010
