"""The paper's subset-case distillation claim at CI size: a student trained with CE + cross-tokenizer KL
on the exact cover-algorithm targets reaches lower bits per byte than CE alone and than the same KL on
the naive first-sub-token projection (the ablation), at equal compute.

Seeds 20-21 (the study uses 10-14; an exploratory run used 0-1). Measured spread (task=crosstok/study,
seeds 10-14): test bpb CE 3.498-3.529, exact KL 3.350-3.422, naive KL 3.782-3.841; the paired per-seed gaps
are CE − exact 0.105-0.149 (mean 0.131, sd 0.017) and naive − exact 0.393-0.448 (mean 0.425, sd 0.024).
The margins, 0.05 (CE) and 0.2 (naive), sit more than four per-seed sd below the measured mean gaps.
Exactness of the targets themselves is tested in test_cover.py. The teacher and the targets are cached
(the study's configuration); cold, they add about 1.5 min.
"""

from __future__ import annotations

import pytest

from litlab.fitting import Fitter
from litlab.methods.crosstok.data import DistillDataModule
from litlab.methods.crosstok.module import evaluate_bpb
from litlab.methods.crosstok.study import ARMS, train_arm

SEEDS = (20, 21)
MARGINS = {"ce": 0.05, "ce+kl (naive projection)": 0.2}
DATA = {
    "teacher_vocab": 512,
    "teacher_steps": 600,
    "student_merges": 32,
    "train_documents": 96,
    "eval_documents": 150,
    "max_tokens": 48,
    "top_k": 8,
    "batch_size": 16,
}
ARCH = {"hidden_size": 64, "num_layers": 2, "num_heads": 2}


@pytest.fixture(scope="module")
def fitter() -> Fitter:
    return Fitter(gradient_clip_val=1.0)


@pytest.fixture(scope="module")
def data(fitter: Fitter) -> DistillDataModule:
    """The teacher and its targets: trained on a cold cache (about 30 s), read from it afterwards."""
    data = DistillDataModule(**DATA)
    data.precompute(fitter)
    return data


@pytest.mark.slow
def test_exact_cross_tokenizer_kl_beats_ce_and_the_naive_projection(
    fitter: Fitter, data: DistillDataModule
) -> None:
    bpb = {}
    for name in ("ce", "ce+kl (exact)", "ce+kl (naive projection)"):
        values = []
        for seed in SEEDS:
            student = train_arm(fitter, data, ARMS[name], seed, steps=150, lr=3e-3, arch=ARCH)
            values.append(evaluate_bpb(student, data.test_dataloader())["bpb"])
        bpb[name] = sum(values) / len(values)
    exact = bpb["ce+kl (exact)"]
    for rival, margin in MARGINS.items():
        assert exact < bpb[rival] - margin, (rival, bpb)
