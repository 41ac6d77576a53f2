"""The RL study's bookkeeping on a tiny configuration: every arm starts from the pretrained model, token
counts grow, GRPO arms report rewards and all-tie shares, and the summary covers every arm."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from litlab.core.errors import ConfigError
from litlab.datamodules.tokenizers import train_bpe, wrap_tokenizer
from litlab.datamodules.webscale_rl import make_corpus
from litlab.methods.webscale_rl import study
from litlab.methods.webscale_rl.rl import qa_prompt
from litlab.methods.webscale_rl.study import (
    ARMS,
    _qa_rows,
    majority_accuracy,
    probes,
    qa_tokens,
    reach_columns,
    rl_study,
    tokens_to_reach,
)
from litlab.task import TaskContext

TINY = {
    "n_entities": 10,
    "pages_per_entity": 2,
    "permute": True,
    "background_entities": 4,
    "shots": 2,
    "noise": 0.2,
    "vocab_size": 300,
    "arch": {"hidden_size": 32, "num_layers": 1, "num_heads": 2},
    "block_size": 32,
    "doc_batch_size": 4,
    "qa_length": 48,
    "batch_size": 4,
    "lr": 3e-3,
    "pretrain_steps": 4,
    "steps": 6,
    "sft_warmup_steps": 2,
    "eval_every": 2,
    "grpo_batch_size": 2,
    "grpo": {"group_size": 2, "max_new_tokens": 4, "temperature": 1.0, "lr": 1e-3},
}


def test_every_arm_is_tracked_from_the_pretrained_model(tmp_path: Path) -> None:
    torch.manual_seed(0)
    out = rl_study(TaskContext.local(tmp_path), seeds=[3], **TINY)
    curves = out["tables"]["curves"]
    assert {r["arm"] for r in out["tables"]["summary"]} == {*ARMS, "majority_answer"}
    starts = [next(r for r in curves if r["arm"] == arm) for arm in ARMS]
    assert all(
        s["tokens"] == 0 and (s["qa"], s["cloze"]) == (starts[0]["qa"], starts[0]["cloze"]) for s in starts
    )
    for arm in ARMS:
        tokens = [r["tokens"] for r in curves if r["arm"] == arm]
        data = [r["data_tokens"] for r in curves if r["arm"] == arm]
        assert tokens == sorted(tokens) and tokens[-1] > 0 and data == sorted(data) and data[-1] > 0
    for arm in ("cpt", "sft"):  # imitation trains on exactly its data
        assert all(r["tokens"] == r["data_tokens"] for r in curves if r["arm"] == arm)
    for arm in ARMS[2:]:  # GRPO's sampled completions are compute, not data
        last = [r for r in curves if r["arm"] == arm][-1]
        assert 0 < last["data_tokens"] < last["tokens"]
    grpo = [r for r in curves if r["arm"].startswith("sft_grpo") and r.get("all_tie") is not None]
    assert grpo and all(0 <= r["all_tie"] <= 1 and 0 <= r["reward"] <= 1 for r in grpo)
    assert set(out["figures"]) == {"accuracy_vs_tokens", "accuracy_vs_data_tokens"}
    signal = out["tables"]["grpo_signal_by_flaw"]
    assert {r["kind"] for r in signal if r["arm"] == "sft_grpo"} == {"clean"}  # the checker kept only these
    for arm in ("sft_grpo", "sft_grpo_no_checker"):
        mine = [r for r in signal if r["arm"] == arm]
        steps = TINY["steps"] - TINY["sft_warmup_steps"]
        assert sum(r["groups"] for r in mine) == steps * TINY["grpo_batch_size"]  # every prompt of every step
        assert sum(r["share_of_groups"] for r in mine) == pytest.approx(1.0)


def test_each_pair_is_named_by_its_flaw_and_the_checker_keeps_only_clean_ones(tmp_path: Path) -> None:
    corpus = make_corpus(12, seed=0, pages_per_entity=2)
    checked = study._qa(corpus, tmp_path / "checked", True, 0.5)
    unchecked = study._qa(corpus, tmp_path / "unchecked", False, 0.5)
    assert set(study.flaw_kinds(checked, corpus["entities"]).values()) == {"clean"}
    kinds = study.flaw_kinds(unchecked, corpus["entities"])
    assert len(kinds) == len(unchecked) and set(kinds.values()) == {"clean", "leaked", "unnamed", "wrong"}
    for (prompt, answer), kind in kinds.items():
        question = prompt.removeprefix("Question: ").split("\n")[0]
        assert (kind == "leaked") == (f"is {answer}." in question)  # stated before it is asked
        assert (kind == "unnamed") == question.startswith("According to the material")
    recall = study.wrong_fact_probe(unchecked, corpus["entities"], checked, 2, seed=0)
    wrong = [pair for pair, kind in kinds.items() if kind == "wrong"]
    assert len(recall["prompts"]) == len(wrong) > 0
    assert sorted(recall["spoiled"]) == sorted(answer for _, answer in wrong)
    truth = {(e["name"], noun): value for e in corpus["entities"] for noun, value in e["facts"]}
    for prompt, answer, spoiled in zip(recall["prompts"], recall["answers"], recall["spoiled"], strict=True):
        asked = prompt.split("\n")[-2]  # after the shots: "Question: <the fact's own question>"
        assert [k for k in truth if f"{k[1]} of {k[0]}?" in asked] and answer != spoiled
        assert prompt.count("Question:") == 3  # two shots, then the question


def test_the_signal_table_weights_each_evaluation_window_by_its_groups() -> None:
    rows = [
        {"arm": "sft_grpo_no_checker", "groups_clean": 3, "all_tie_clean": 1 / 3, "reward_clean": 0.5,
         "groups_wrong": 1, "all_tie_wrong": 1.0, "reward_wrong": 0.0},
        {"arm": "sft_grpo_no_checker", "groups_clean": 1, "all_tie_clean": 0.0, "reward_clean": 0.25},
        {"arm": "cpt", "qa": 0.1},
    ]  # fmt: skip
    (clean, wrong) = study.signal_by_flaw(rows)
    assert (clean["kind"], clean["groups"], clean["all_tie"]) == ("clean", 4, 0.25)
    assert clean["reward"] == pytest.approx((3 * 0.5 + 0.25) / 4)
    assert (wrong["share_of_groups"], wrong["share_of_signal"], clean["share_of_signal"]) == (0.2, 0.0, 1.0)


def test_the_majority_baseline_answers_each_attribute_with_its_most_frequent_value() -> None:
    qa = [
        {"question": "A is a town. What is the river of A?", "answer": "Vint"},
        {"question": "B is a town. What is the river of B?", "answer": "Vint"},
        {"question": "C is a town. What is the river of C?", "answer": "Mell"},
    ]
    held_out = [
        {"noun": "river", "answer": "Vint"},
        {"noun": "river", "answer": "Mell"},
        {"noun": "dish", "answer": "x"},
    ]
    assert majority_accuracy(qa, held_out) == 1 / 3


def test_every_held_out_question_gets_shots_about_other_training_entities() -> None:
    corpus = make_corpus(12, seed=1)
    qa = [
        {"question": f"{e['name']} is a x. What is the y of {e['name']}?", "answer": "z"}
        for e in corpus["entities"]
    ]
    probe = probes(corpus["eval"], qa, 3, seed=0)
    prompts, answers = probe["qa"]
    assert answers == [i["answer"] for i in corpus["eval"]] and probe == probes(corpus["eval"], qa, 3, seed=0)
    for item, prompt in zip(corpus["eval"], prompts, strict=True):
        *shots, asked = prompt.split("Question: ")[1:]
        assert len(shots) == 3 and asked == f"{item['question']}\nAnswer:"
        assert all(item["entity"] not in shot for shot in shots)


def test_tokens_to_reach_is_the_first_trained_point_at_the_target() -> None:
    curve = [
        {"tokens": 0, "qa": 0.5},
        {"tokens": 10, "qa": 0.1},
        {"tokens": 20, "qa": 0.3},
        {"tokens": 30, "qa": 0.4},
    ]
    assert tokens_to_reach(curve, 0.3) == 20 and tokens_to_reach(curve, 0.0) == 10
    assert tokens_to_reach(curve, 0.45) is None


def test_reach_columns_count_both_ways_against_the_tokens_cpt_itself_needed() -> None:
    cpt = [
        {"tokens": 0, "data_tokens": 0, "qa": 0.1, "qa_logprob": -4.0},
        {"tokens": 300, "data_tokens": 300, "qa": 0.3, "qa_logprob": -2.2},
        {"tokens": 600, "data_tokens": 600, "qa": 0.3, "qa_logprob": -2.0},
    ]
    curve = [
        {"tokens": 0, "data_tokens": 0, "qa": 0.1, "qa_logprob": -4.0},
        {"tokens": 200, "data_tokens": 20, "qa": 0.3, "qa_logprob": -2.5},
        {"tokens": 400, "data_tokens": 40, "qa": 0.2, "qa_logprob": -1.9},
    ]
    assert reach_columns(curve, cpt) == {
        "tokens_to_cpt_acc": 200,
        "tokens_ratio_acc": 1.5,  # CPT first reached its final 0.3 at 300 tokens
        "data_tokens_to_cpt_acc": 20,
        "data_tokens_ratio_acc": 15.0,
        "tokens_to_cpt_logprob": 400,
        "tokens_ratio_logprob": 1.5,
        "data_tokens_to_cpt_logprob": 40,
        "data_tokens_ratio_logprob": 15.0,
    }
    assert reach_columns(curve[:2], cpt)["data_tokens_ratio_logprob"] == 0.0  # never reached


def test_grpo_data_tokens_of_a_qa_pair_are_the_tokens_sft_trains_on() -> None:
    qa = [{"question": "Mira is a town. What is the river of Mira?", "answer": "Vint"}] * 2
    qa += [{"question": "Oso is a lake. What is the fish of Oso?", "answer": "Carp Dell"}]
    tokenizer = wrap_tokenizer(train_bpe([f"{qa_prompt(p['question'])} {p['answer']}" for p in qa], 300))
    sft = sum(int(r["attention_mask"].sum()) for r in _qa_rows(tokenizer, qa, 64))
    assert qa_tokens(tokenizer, [qa_prompt(p["question"]) for p in qa], [p["answer"] for p in qa]) == sft


def test_seeds_in_forked_processes_give_the_sequential_result(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LITLAB_CACHE", str(tmp_path / "cache_a"))  # each run pretrains its own models
    one = rl_study(TaskContext.local(tmp_path / "a"), seeds=[3, 4], **TINY)["tables"]
    monkeypatch.setenv("LITLAB_CACHE", str(tmp_path / "cache_b"))
    two = rl_study(TaskContext.local(tmp_path / "b"), seeds=[3, 4], processes=2, **TINY)["tables"]
    assert one == two


def test_a_rerun_reads_finished_seeds_back_and_evaluates_pretraining_as_told(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ctx = TaskContext.local(tmp_path)
    first = rl_study(ctx, seeds=[3], pretrain_eval_every=4, **TINY)["tables"]
    assert [r["tokens"] > 0 for r in first["curves"] if r["arm"] == "pretrain"] == [True]

    def retrain(*args: object) -> None:
        raise AssertionError("a finished seed was trained again")

    monkeypatch.setattr(study, "pretrained", retrain)
    assert rl_study(ctx, seeds=[3], pretrain_eval_every=4, **TINY)["tables"] == first


def test_a_rerun_over_curves_without_data_tokens_is_a_one_line_error(tmp_path: Path) -> None:
    old = {"cpt": [{"tokens": 0, "qa": 0.1, "cloze": 0.0}]}
    (tmp_path / "seed3").mkdir()
    (tmp_path / "seed3" / "curves.json").write_text(json.dumps(old))
    with pytest.raises(ConfigError, match="predates data-token counting"):
        rl_study(TaskContext.local(tmp_path), seeds=[3], **TINY)
