"""Pair lists, detection metrics, PCS and the evaluate task on saved tiny checkpoints."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from litlab.core.errors import LitlabError
from litlab.lm import build_lm, llama_config
from litlab.methods.fingerprint import derive
from litlab.methods.fingerprint.baselines import huref_invariants, pcs
from litlab.methods.fingerprint.evaluate import detection_metrics, evaluate, read_pairs
from litlab.task import TaskContext

VOCAB = json.dumps({"model": {"vocab": {f"t{i}": i for i in range(300)}}, "added_tokens": []})


@pytest.fixture(scope="module")
def pair_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("pairs")
    models = {}
    for seed in (0, 1):
        torch.manual_seed(seed)
        models[f"base{seed}"] = build_lm(llama_config(300, 32, 2, 4, initializer_range=0.05))
    models["perm0"] = derive.permute_hidden(models["base0"], torch.Generator().manual_seed(3))[0]
    models["scaled1"] = derive.scale_qk(models["base1"], 2.0)
    for name, model in models.items():
        model.save_pretrained(root / name)
        (root / name / "tokenizer.json").write_text(VOCAB)
    rows = [
        "first,second,label,category",
        "base0,perm0,1,permute_hidden",
        "base1,scaled1,1,scale_qk",
        "base0,base1,0,neg_base_pair",
        f"{root / 'perm0'},base1,0,neg_hard",
    ]
    (root / "pairs.csv").write_text("\n".join(rows) + "\n")
    return root / "pairs.csv"


def test_detection_metrics_by_hand() -> None:
    labels = np.array([1, 1, 0, 0])
    perfect = detection_metrics(labels, np.array([0.9, 0.8, 0.1, 0.2]))
    assert perfect["auc"] == 1.0 and perfect["tpr_at_lowest_fpr"] == 1.0
    assert perfect["margin"] == pytest.approx(0.6)
    mixed = detection_metrics(labels, np.array([0.9, 0.15, 0.1, 0.2]))
    assert mixed["auc"] == pytest.approx(0.75) and mixed["tpr_at_lowest_fpr"] == 0.5
    assert detection_metrics(labels, np.array([0.9, math.nan, 0.1, 0.2]))["tpr_at_lowest_fpr"] == 0.5


def test_pcs_is_one_for_a_copy_and_undefined_across_shapes(pair_file: Path, tmp_path: Path) -> None:
    root = pair_file.parent
    assert pcs(root / "base0", root / "base0") == pytest.approx(1.0)
    # a permutation defeats the flattened cosine: the copy scores like an independent model (norm gains of 1
    # keep both above 0)
    independent = pcs(root / "base0", root / "base1")
    assert pcs(root / "base0", root / "perm0") == pytest.approx(independent, abs=0.05)
    torch.manual_seed(0)
    build_lm(llama_config(300, 48, 2, 4)).save_pretrained(tmp_path / "wide")
    assert math.isnan(pcs(root / "base0", tmp_path / "wide"))


def test_huref_invariants_survive_permutation_and_qk_scaling(pair_file: Path) -> None:
    root = pair_file.parent
    assert huref_invariants(root / "base0", root / "perm0") == pytest.approx(1.0, abs=1e-9)
    assert huref_invariants(root / "base1", root / "scaled1") == pytest.approx(1.0, abs=1e-9)
    assert abs(huref_invariants(root / "base0", root / "base1")) < 0.3


def test_evaluate_task_scores_a_pair_list(pair_file: Path, tmp_path: Path) -> None:
    out = evaluate(TaskContext.local(tmp_path), pairs=str(pair_file), methods=["awm", "no_sign", "pcs"])
    metrics = out["metrics"]
    assert metrics["awm/auc"] == 1.0 and metrics["awm/tpr_at_lowest_fpr"] == 1.0
    pairs = {r["category"]: r for r in out["tables"]["pairs"]}
    assert abs(pairs["permute_hidden"]["no_sign"]) < 0.2
    assert pairs["permute_hidden"]["awm"] == pytest.approx(1.0, abs=1e-5)
    assert pairs["permute_hidden"]["awm_z"] > 300
    assert {r["category"] for r in out["tables"]["categories"]} == set(pairs)


def test_bad_pair_lists_fail_in_one_line(tmp_path: Path) -> None:
    with pytest.raises(LitlabError, match="task.pairs=<csv> is required"):
        evaluate(TaskContext.local(tmp_path))
    with pytest.raises(LitlabError, match="does not exist"):
        read_pairs(tmp_path / "nope.csv")
    (tmp_path / "bad.csv").write_text("a,b\n1,2\n")
    with pytest.raises(LitlabError, match="needs columns first,second,label,category"):
        read_pairs(tmp_path / "bad.csv")
    with pytest.raises(LitlabError, match="unknown"):
        evaluate(TaskContext.local(tmp_path), pairs=str(tmp_path / "bad.csv"), methods=["awm", "magic"])
