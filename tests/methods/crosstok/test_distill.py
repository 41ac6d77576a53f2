"""Distillation pieces: the sparse losses against dense hand computations, the two target kinds, the data
module on a local teacher folder, and the student module's losses and config errors."""

from __future__ import annotations

from functools import partial
from pathlib import Path

import pytest
import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from litlab.core.errors import ConfigError
from litlab.fitting import Fitter
from litlab.methods.crosstok.cover import CrossTokenizerScorer
from litlab.methods.crosstok.data import DistillDataModule
from litlab.methods.crosstok.losses import label_only, sparse_kl
from litlab.methods.crosstok.module import CrossTokDistiller, evaluate_bpb
from litlab.methods.crosstok.pair import SubsetPair
from litlab.methods.crosstok.targets import exact_targets, naive_targets


def test_sparse_kl_is_the_cross_entropy_with_a_rest_bucket() -> None:
    torch.manual_seed(0)
    logp = torch.log_softmax(torch.randn(5, 11, dtype=torch.float64), -1)
    q = torch.softmax(torch.randn(5, 11, dtype=torch.float64), -1)
    top = q.topk(3, -1)
    rest_q = 1 - top.values.sum(-1)
    rest_p = 1 - logp.exp().gather(-1, top.indices).sum(-1)
    expected = -(top.values * logp.gather(-1, top.indices)).sum(-1) - rest_q * rest_p.log()
    torch.testing.assert_close(sparse_kl(logp, top.indices, top.values), expected)
    full = torch.arange(11).expand(5, 11)
    torch.testing.assert_close(sparse_kl(logp, full, q), -(q * logp).sum(-1))  # k = V: the full CE


def test_label_only_is_a_binary_cross_entropy_on_the_label() -> None:
    torch.manual_seed(1)
    logp = torch.log_softmax(torch.randn(4, 7, dtype=torch.float64), -1)
    labels, q = torch.tensor([0, 3, 6, 2]), torch.tensor([0.9, 0.2, 0.5, 1.0], dtype=torch.float64)
    p = logp.exp()[torch.arange(4), labels]
    expected = -q * p.log() - (1 - q) * (1 - p).log()
    torch.testing.assert_close(label_only(logp, labels, q), expected)


def test_exact_targets_are_the_cover_distributions(pairs: dict[int, SubsetPair], teacher_lm) -> None:
    pair = pairs[100]
    ids = pair.student.encode("First Citizen: we", add_special_tokens=False)
    scorer = CrossTokenizerScorer(teacher_lm, pair)
    targets = exact_targets(scorer, ids, 4)
    state = scorer.state_for(ids[:5])
    full = scorer.next_logprobs(state).exp()
    torch.testing.assert_close(targets.probs[5].double(), full.topk(4).values, atol=1e-6, rtol=0)
    assert targets.label[5].item() == pytest.approx(full[ids[5]].item(), abs=1e-6)
    assert (targets.probs.sum(-1) <= 1 + 1e-6).all()


def test_naive_targets_project_the_last_aligned_teacher_distribution(
    pairs: dict[int, SubsetPair], teacher_lm: PreTrainedModel
) -> None:
    pair = pairs[100]
    text = "First Citizen: we"
    ids = pair.student.encode(text, add_special_tokens=False)
    teacher_ids = pair.teacher.encode(text, add_special_tokens=False)
    scorer = CrossTokenizerScorer(teacher_lm, pair)
    targets = naive_targets(scorer, ids, 1)
    with torch.no_grad():
        probs = torch.softmax(teacher_lm(input_ids=torch.tensor([[0, *teacher_ids]])).logits[0].double(), -1)
    ends = torch.cumsum(pair.lengths[teacher_ids], 0).tolist()
    for i in range(len(ids)):
        m = sum(e <= i for e in ends)  # teacher tokens wholly inside the first i student tokens
        projected = torch.zeros(pair.student_size, dtype=torch.float64).index_add_(0, pair.first, probs[m])
        assert targets.ids[i, 0].item() == projected.argmax().item()
        assert targets.label[i].item() == pytest.approx(projected[ids[i]].item(), abs=1e-6)


@pytest.fixture(scope="module")
def teacher_folder(
    tmp_path_factory: pytest.TempPathFactory, teacher_lm: PreTrainedModel, tokenizer: PreTrainedTokenizerBase
) -> Path:
    folder = tmp_path_factory.mktemp("teacher")
    teacher_lm.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def test_data_module_batches_carry_both_targets_and_train_each_loss(teacher_folder: Path) -> None:
    data = DistillDataModule(
        teacher_path=str(teacher_folder),
        student_merges=100,
        train_documents=4,
        eval_documents=3,
        max_tokens=12,
        top_k=4,
        batch_size=2,
    )
    data.setup("fit")
    batch = next(iter(data.train_dataloader()))
    valid = batch["labels"][:, 1:] != -100
    for kind in ("exact", "naive"):
        assert batch[f"{kind}_ids"].shape == (2, 13, 4)
        assert (batch[f"{kind}_probs"][:, 1:][valid].sum(-1) <= 1 + 1e-5).all()
    assert batch["byte_counts"][:, 1:][valid].min() > 0
    for loss, projection in (("ce", "exact"), ("kl", "exact"), ("kl", "naive"), ("label", "exact")):
        module = CrossTokDistiller(
            loss=loss,
            projection=projection,
            optimizer=partial(torch.optim.AdamW, lr=1e-3),
            total_steps=1,
            arch={"hidden_size": 16, "num_layers": 1, "num_heads": 2},
        )
        module.bind_data(data.data_spec())
        Fitter().fit(module, data.train_dataloader(), max_steps=1, seed=0)
        assert evaluate_bpb(module, data.val_dataloader())["bpb"] > 0


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"loss": "mse"}, "model.loss"),
        ({"projection": "x"}, "model.projection"),
        ({"loss": "label", "projection": "naive"}, "exact targets"),
        ({"kl_weight": 2.0}, "kl_weight"),
    ],
)
def test_bad_student_configs_fail_in_one_line(kwargs: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        CrossTokDistiller(optimizer=partial(torch.optim.AdamW), **kwargs)
