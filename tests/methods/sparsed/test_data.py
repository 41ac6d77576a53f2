"""The multi-key retrieval data: one token per character, the answer is the two asked needles' values, the
prompt carries no labels, splits take filler from disjoint parts of the file."""

from __future__ import annotations

import pytest

from litlab.core.errors import ConfigError
from litlab.datamodules.retrieval_text import RetrievalTextDataModule


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> RetrievalTextDataModule:
    return RetrievalTextDataModule(length=160, n_keys=4, value_length=4, n_train=32, n_val=8, n_test=8)


def test_answer_is_the_values_of_the_asked_keys(data: RetrievalTextDataModule) -> None:
    split = data.split("test")
    tokenizer = data.data_spec()["tokenizer"]
    for row in range(len(split["input_ids"])):
        text = tokenizer.decode(split["input_ids"][row])
        assert len(text) == 160
        prompt, answer = text[:-8], text[-8:]
        keys = prompt[-6:-1].split(",")
        assert prompt.endswith(":") and prompt[-8:-6] == " {"
        starts = split["needle_start"][row].tolist()
        needles = {prompt[s + 1 : s + 3]: prompt[s + 4 : s + 8] for s in starts}
        assert all(prompt[s] == "{" and prompt[s + 8] == "}" for s in starts)
        assert answer == needles[keys[0]] + needles[keys[1]]
        assert [list(needles)[i] for i in split["asked"][row].tolist()] == keys


def test_labels_only_on_the_answer_and_batches_have_the_lm_keys(data: RetrievalTextDataModule) -> None:
    split = data.split("train")
    assert (split["labels"][:, :-8] == -100).all()
    assert (split["labels"][:, -8:] == split["input_ids"][:, -8:]).all()
    batch = next(iter(data.train_dataloader()))
    assert set(batch) == {"input_ids", "labels", "byte_counts"} and batch["input_ids"].shape == (16, 160)
    assert data.data_spec()["block_size"] == 160


def test_splits_differ_and_are_reproducible(data: RetrievalTextDataModule) -> None:
    again = RetrievalTextDataModule(length=160, n_keys=4, value_length=4, n_train=32, n_val=8, n_test=8)
    assert (again.split("test")["input_ids"] == data.split("test")["input_ids"]).all()
    assert not (data.split("val")["input_ids"][:8] == data.split("test")["input_ids"]).all()


def test_too_short_a_context_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="no room"):
        RetrievalTextDataModule(length=40, n_keys=6, value_length=8, n_train=4, n_val=4, n_test=4).split(
            "test"
        )
