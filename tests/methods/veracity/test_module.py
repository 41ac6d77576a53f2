"""The substrate LM module through the data contract and the Fitter; AVI's loss, training and its
independence from the answer."""

from __future__ import annotations

from functools import partial

import pytest
import torch

from litlab.core.errors import LitlabError
from litlab.datamodules.prontoqa import ID, ProblemConfig, ProntoQADataModule, generate_problems
from litlab.fitting import Fitter
from litlab.methods.veracity.module import VeracityLM, hide_tags
from litlab.methods.veracity.pipeline import fit_avi
from litlab.methods.veracity.scoring import tag_ids


def test_substrate_lm_trains_through_the_fitter() -> None:
    data = ProntoQADataModule(train_size=128, eval_size=32, batch_size=16, seed=0)
    module = VeracityLM(optimizer=partial(torch.optim.AdamW, lr=3e-3), total_steps=20)
    with pytest.raises(LitlabError, match="bind_data"):
        module.setup("fit")
    module.bind_data(data.data_spec())
    result = Fitter().fit(
        module, data.train_dataloader(), data.val_dataloader(), max_steps=20, val_every_n_steps=20
    )
    assert result.steps == 20 and result.metrics["val/loss"] < 3.5  # log(58 words) = 4.06 at chance


def test_avi_learns_labels_and_never_sees_the_answer(tiny_lm) -> None:
    batch = generate_problems(64, ProblemConfig(depth_min=2, depth_max=3), seed=1)
    labels = batch["labels"] == 1
    avi = fit_avi(Fitter(), tiny_lm, batch, labels, steps=1, lr=1e-3, seed=0)
    avi_batch = (hide_tags(batch), batch["slots"], batch["labels"], tag_ids(batch))
    before = avi.loss(avi_batch).item()
    avi = fit_avi(Fitter(), tiny_lm, batch, labels, steps=40, lr=3e-3, seed=0)
    assert avi.loss(avi_batch).item() < before
    flipped = batch["tokens"].clone()
    rows = torch.arange(64)
    flipped[rows, batch["answer_pos"]] = torch.where(batch["answer"] == 1, ID["false"], ID["true"])
    assert torch.equal(avi.predict(batch), avi.predict({**batch, "tokens": flipped}))
