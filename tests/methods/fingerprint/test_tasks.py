"""The testbed task at toy size: its pairs, AWM's separation, its tables and plot, a user's extra pairs."""

from __future__ import annotations

import csv
import dataclasses
import json
import math
from pathlib import Path

import matplotlib.pyplot as plt
import pytest
import torch

from litlab.core.errors import LitlabError
from litlab.lm import build_lm, llama_config
from litlab.methods.fingerprint import derive, tasks
from litlab.task import TaskContext
from tests.methods.fingerprint.claim_setup import CI_SPEC

SPEC = dataclasses.replace(
    CI_SPEC,
    hidden=32,
    layers=2,
    heads=2,
    vocab_size=300,
    corpus_bytes=20_000,
    block_size=16,
    batch_size=4,
    base_steps=5,
    child_steps=3,
)
BASES = [{"seed": 0, "corpus": "a"}, {"seed": 1, "corpus": "b", "hidden": 24}]
CATEGORIES = ["sft", "permute_hidden", "width_prune"]
METHODS = ["awm", "no_sign", "pcs", "huref"]
VOCAB = json.dumps({"model": {"vocab": {f"t{i}": i for i in range(300)}}, "added_tokens": []})


def _user_pairs(folder: Path) -> Path:
    """A user's pair list beside its models (relative paths): a hidden-permuted copy, an independent model."""
    models = {}
    for seed in (10, 11):
        torch.manual_seed(seed)
        models[f"mine{seed}"] = build_lm(llama_config(300, 32, 2, 4, initializer_range=0.05))
    models["mine10_permuted"] = derive.permute_hidden(models["mine10"], torch.Generator().manual_seed(5))[0]
    for name, model in models.items():
        model.save_pretrained(folder / name)
        (folder / name / "tokenizer.json").write_text(VOCAB)
    rows = ["first,second,label,category", "mine10,mine10_permuted,1,user_copy", "mine10,mine11,0,user_other"]
    (folder / "pairs.csv").write_text("\n".join(rows) + "\n")
    return folder / "pairs.csv"


def test_testbed_scores_every_built_and_extra_pair_and_awm_separates_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LITLAB_CACHE", str(tmp_path / "cache"))
    extra = _user_pairs(tmp_path / "mine")
    out = tasks.testbed(  # imported as tasks.testbed: pytest would collect a bare test* name
        TaskContext.local(tmp_path / "run"),
        bases=BASES,
        spec=dataclasses.asdict(SPEC),
        categories=CATEGORIES,
        extra_pairs=str(extra),
        methods=METHODS,
        root=str(tmp_path / "testbed"),
    )
    with (tmp_path / "testbed" / "pairs.csv").open(newline="") as handle:
        built = list(csv.DictReader(handle))
    # per base: one child per category; negatives: the base pair, a Gaussian per base, an SFT child of each
    # base against the other base
    assert len(built) == 2 * 3 + 1 + 2 + 2
    assert all((tmp_path / "testbed" / row["second"] / "config.json").is_file() for row in built)
    rows = out["tables"]["pairs"]
    counts = {row["category"]: row["pairs"] for row in out["tables"]["categories"]}
    assert counts == {
        "sft": 2,
        "permute_hidden": 2,
        "width_prune": 2,
        "neg_base_pair": 1,
        "neg_gaussian": 2,
        "neg_hard": 2,
        "user_copy": 1,
        "user_other": 1,
    }
    metrics = out["metrics"]
    assert metrics["pairs/positive"] == 7 and metrics["pairs/negative"] == 6
    # AWM undoes the permutation (the sign-blind ablation does not) and leaves unrelated models near 0
    user = {row["category"]: row for row in rows if row["category"].startswith("user")}
    assert user["user_copy"]["first"] == "mine10" and user["user_copy"]["awm"] == pytest.approx(1.0, abs=1e-6)
    assert abs(user["user_other"]["awm"]) < 0.1
    permuted = [row for row in rows if row["category"] == "permute_hidden"]
    assert all(row["awm"] == pytest.approx(1.0, abs=1e-6) and row["no_sign"] < 0.3 for row in permuted)
    assert (
        metrics["awm/auc"] == 1.0 and metrics["awm/tpr_at_lowest_fpr"] == 1.0 and metrics["awm/margin"] > 0.5
    )
    assert [row["method"] for row in out["tables"]["methods"]] == METHODS
    # PCS is undefined across widths: NaN for those pairs, scored as 0 (unrelated) in its metrics
    assert any(math.isnan(row["pcs"]) for row in rows) and 0 <= metrics["pcs/auc"] <= 1
    ours = {row["quantity"]: row for row in out["tables"]["paper_vs_ours"]}
    # the comparison with the paper is of the testbed's own pairs: the user's copy is left out of it
    positives = [row for row in rows if row["label"] == 1 and not row["category"].startswith("user")]
    weakest = min(positives, key=lambda row: row["awm_z"])
    assert ours["min Z over derived pairs"]["ours"] == weakest["awm_z"] > 12.1
    assert ours["min Z over derived pairs"]["note"] == f"weakest: {weakest['category']}"
    assert ours["AUC (AWM)"]["ours"] == 1.0
    figure = out["figures"]["scores"]
    assert len(figure.axes) == 3  # awm, pcs, huref: the plotted methods that ran
    plt.close(figure)


@pytest.mark.parametrize(
    ("options", "error"),
    [
        ({"extra_pairs": "no_such_pairs.csv"}, "pair list no_such_pairs.csv does not exist"),
        ({"methods": ["awm", "awn"]}, r"task.methods has unknown \['awn'\]"),
    ],
)
def test_a_bad_pair_list_or_method_fails_in_one_line_before_anything_is_built(
    tmp_path: Path, options: dict, error: str
) -> None:
    with pytest.raises(LitlabError, match=error):
        tasks.testbed(
            TaskContext.local(tmp_path / "run"),
            bases=BASES,
            spec=dataclasses.asdict(SPEC),
            root=str(tmp_path / "testbed"),
            **options,
        )
    assert not (tmp_path / "testbed").exists()


def test_without_awm_there_is_no_paper_comparison_and_without_a_plotted_method_no_plot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LITLAB_CACHE", str(tmp_path / "cache"))
    out = tasks.testbed(
        TaskContext.local(tmp_path / "run"),
        bases=BASES,
        spec=dataclasses.asdict(SPEC),
        categories=["permute_hidden"],
        methods=["no_sign"],
        root=str(tmp_path / "testbed"),
    )
    assert set(out["tables"]) == {"methods", "categories", "pairs"}
    assert [row["method"] for row in out["tables"]["methods"]] == ["no_sign"]
    assert out["figures"] == {}  # the ablation alone has no strip plot (it crashed on zero panels)
