"""SparseD is lossless on retrieval, where a fixed sink + window pattern loses the answers, on a model that
retrieves (recipe/sparsed/retrieval_512, shipped in data/sparsed), on example sets not used for tuning.

32 prompts of 512 tokens (two needles, the question asks both values: 16 answer tokens) are decoded in 16
steps densely, with SparseD (s = 0.2, ρ = 0.3, b = 16) and with the sink + window pattern at the same
budget.

Measured by the study (`litlab-run task=sparsed/retrieval_study`, results/sparsed/retrieval_study: 5 sets of
32 prompts, seeds 100-104): exact match dense 1.000 ± 0, SparseD 1.000 ± 0 (density 0.344, attention cost
0.51), sink + window 0.000 ± 0 (token accuracy 0.445 ± 0.023); 160 of 160 answers either way, so there is no
spread to set a margin from. The thresholds allow one lost answer in 32 for SparseD and 3 in 32 for sink +
window, and ask dense decoding to get at least 29 of 32 (the model retrieves). The other ablations do not
separate on this model (s = 0, no isolated selection and per-step recomputation 1.000, head-averaged 0.988 ±
0.028); the continuation claim test (test_claim.py) covers them.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from omegaconf import OmegaConf
from transformers import PreTrainedModel

from litlab.methods.sparsed.evaluation import ARMS, compare_arms
from litlab.methods.sparsed.model import Recipe, pretrained
from litlab.methods.sparsed.tasks import _examples, _recipe
from tests.conftest import CONFIGS

SEED = 300
MIN_DENSE_EXACT_MATCH = 29 / 32
MAX_SPARSED_LOSS = 1 / 32
MAX_WINDOW_EXACT_MATCH = 3 / 32


@pytest.fixture(scope="module")
def recipe() -> Recipe:
    """The config's recipe, so the test decodes the model that ``task=sparsed/retrieval`` does."""
    return _recipe(
        OmegaConf.to_container(OmegaConf.load(Path(str(CONFIGS)) / "recipe/sparsed/retrieval_512.yaml"))
    )


@pytest.fixture(scope="module")
def model(recipe: Recipe) -> PreTrainedModel:
    torch.set_num_threads(1)
    return pretrained(recipe)[0]


@pytest.mark.slow
def test_sparsed_keeps_every_retrieved_answer_and_sink_window_loses_them(
    model: PreTrainedModel, recipe: Recipe
) -> None:
    inputs = _examples(recipe, SEED, 32, "retrieval")
    arms = {name: ARMS[name] for name in ("sparsed", "sink_window")}
    rows = {
        row["arm"]: row
        for row in compare_arms(model, inputs, 16, 16, s=0.2, rho=0.3, block=16, arms=arms, two_values=True)
    }
    dense, sparsed, window = rows["dense"], rows["sparsed"], rows["sink_window"]
    assert dense["exact_match"] >= MIN_DENSE_EXACT_MATCH  # the model retrieves
    assert sparsed["density"] < 0.4 and sparsed["attention_cost"] < 0.6
    assert sparsed["exact_match"] >= dense["exact_match"] - MAX_SPARSED_LOSS
    assert window["exact_match"] <= MAX_WINDOW_EXACT_MATCH
