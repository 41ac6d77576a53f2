"""SparseD's claim at CPU scale, on example sets not used for tuning (seeds 300, 301; the study used 100-104).

The cached tiny LLaDA (``litlab.methods.sparsed.model``, trained on first use: about 5 minutes on one
core) decodes the last 16 tokens of 64 tinyshakespeare windows of 256 tokens in 16 steps, densely and with
SparseD (s = 0.2, ρ = 0.3, b = 16: density 0.375 of the 16 × 16 block table, attention FLOPs 0.53 of dense),
SparseD with s = 0 and SparseD with one head-averaged pattern.

Measured on the study's 5 continuation sets of 32 (results/sparsed/study, arms_per_seed): SparseD's token
agreement with dense 0.805 ± 0.036 (range 0.746-0.834); its lead over s = 0 0.125 ± 0.034 (0.086-0.170) and
over the head-averaged pattern 0.083 ± 0.024 (0.057-0.117). That spread is of prompt sets on one trained
model. Training is not bit-reproducible across runs, and the model a cold cache trains differs: on these
seeds three independently trained models gave agreement 0.815 / 0.791 / 0.921, leads over s = 0 0.095 /
0.040 / 0.036 and over the head-averaged pattern 0.104 / 0.070 / 0.042 (the study's model, a serial cold
run, the CI replica's cold run); a fourth cold run (issue 35) 0.828, 0.064, 0.106. The first thresholds
(leads 0.05 and 0.03, from the one model) failed on the retrained models; the leads asserted now, 0.02,
sit below the smallest lead of the four models. Mutations
that fail it: keeping the least important blocks (agreement 0.638), selecting at step 0 whatever s (lead
over s = 0: 0), one head-averaged pattern for SparseD (lead over it: 0).
Cheaper recipes (issue 35: this model's training is most of the test's time) lose the separation, so the
500-step recipe stays: 250 steps at lr 4e-3 (half the time), four models (seeds 0-3), leads over s = 0
0.075 / 0.057 / 0.014 / 0.044 and over the head-averaged pattern 0.043 / 0.050 / 0.009 / 0.032 (seed 2
fails both); 350 steps at lr 4e-3, seed 1 0.026 / 0.077, seed 2 -0.022 / -0.089 (reversed). A 2-layer model
(1.9x cheaper per step; hidden size barely changes CPU cost, layers do) kept both leads on four models but
two more cold runs gave 0.090 / 0.0195 and 0.006 / -0.004 on these seeds, so it was not adopted.
The model this test decodes ships with litlab (data/sparsed): the default recipe's model as a cold cache
trains it on the CI machine (two cold runs bit-identical), the third of the models above (0.921, 0.036,
0.042); shipping it took the test from ~115 s on a cold cache to ~21 s.
At this scale SparseD is NOT lossless (the model is weak, its logits have small margins, so ~15 % of tokens
flip); what reproduces is the ordering: dense early steps and head-specific patterns both matter.
"""

from __future__ import annotations

import pytest
import torch
from transformers import PreTrainedModel

from litlab.methods.sparsed.evaluation import ARMS, compare_arms
from litlab.methods.sparsed.model import Recipe, pretrained
from litlab.methods.sparsed.tasks import _examples

SEEDS = (300, 301)
MIN_AGREEMENT = 0.72
MIN_GAP_S0 = 0.02
MIN_GAP_HEAD_AVERAGE = 0.02


@pytest.fixture(scope="module")
def model() -> PreTrainedModel:
    """The default recipe's model: shipped in ``data/sparsed`` (what a cold cache trains, in two cold runs
    bit for bit), copied into the cache on first use, loaded after."""
    torch.set_num_threads(1)
    return pretrained(Recipe())[0]


@pytest.mark.slow
def test_sparsed_keeps_closest_to_dense_and_its_ablations_lose_more(model: PreTrainedModel) -> None:
    inputs = torch.cat([_examples(Recipe(), seed, 32) for seed in SEEDS])
    arms = {name: ARMS[name] for name in ("sparsed", "no_skip_s0", "head_average")}
    rows = {
        row["arm"]: row for row in compare_arms(model, inputs, 16, 16, s=0.2, rho=0.3, block=16, arms=arms)
    }
    sparsed = rows["sparsed"]
    assert sparsed["density"] == pytest.approx(6 / 16) and sparsed["attention_cost"] < 0.55
    assert sparsed["agreement"] >= MIN_AGREEMENT
    assert sparsed["agreement"] - rows["no_skip_s0"]["agreement"] >= MIN_GAP_S0
    assert sparsed["agreement"] - rows["head_average"]["agreement"] >= MIN_GAP_HEAD_AVERAGE
