"""Stage contracts: the checker catches planted leaks, missing backgrounds and wrong answers; the noisy
rule generator's spoiled pairs are exactly the ones the checker rejects; LLM replies parse robustly."""

from __future__ import annotations

import pytest

from litlab.datamodules.webscale_rl import make_corpus, question
from litlab.lm.chat_models import parse_json
from litlab.methods.webscale_rl.stages import (
    messages,
    parse,
    read_facts,
    read_intro,
    rule_check,
    rule_filter,
    rule_generate,
    rule_identify,
)

CORPUS = make_corpus(120, seed=5)
PAGES = [d for d in CORPUS["documents"] if d["source"] == "entity"]


def _check(text: str, q: str, a: str) -> tuple[bool, bool, bool]:
    labels = rule_check({"key": "x", "text": text, "question": q, "answer": a})
    return labels["has_context"], labels["answer_correctness"], labels["info_leakage"]


def test_filter_keeps_fact_pages_and_drops_junk() -> None:
    for doc in CORPUS["documents"]:
        kept = rule_filter({"key": doc["id"], "text": doc["text"]})["qualified"]
        assert kept == (doc["source"] in ("entity", "repost")), doc


def test_identifier_names_the_domain_and_three_personas() -> None:
    by_name = {e["name"]: e for e in CORPUS["entities"]}
    for doc in PAGES:
        out = rule_identify({"key": doc["id"], "text": doc["text"]})
        assert out["domain"] == by_name[read_intro(doc["text"])[0]]["domain"] and len(out["personas"]) == 3


@pytest.mark.parametrize(
    "spoil",
    [
        lambda name,
        kind,
        noun,
        value: f"{name} is a {kind} whose {noun} is {value}. What is the {noun} of {name}?",
        lambda name, kind, noun, value: f"Tell me, what is the {noun} of {name} ({value.upper()})?",
        lambda name, kind, noun, value: f"{name}, a {kind}: is the {noun} of {name} really {value}?",
    ],
)
def test_checker_catches_planted_leaks(spoil) -> None:  # noqa: ANN001
    for doc in PAGES[:40]:
        name, kind = read_intro(doc["text"])
        _, noun, value = read_facts(doc["text"])[0]
        assert _check(doc["text"], question(name, kind, noun), value) == (True, True, False)
        assert _check(doc["text"], spoil(name, kind, noun, value), value)[2] is True


def test_checker_catches_missing_background_and_wrong_answers() -> None:
    doc = PAGES[0]
    name, kind = read_intro(doc["text"])
    (_, noun, value), (_, other_noun, other_value) = read_facts(doc["text"])[:2]
    assert _check(doc["text"], f"According to the material, what is the {noun}?", value)[0] is False
    assert _check(doc["text"], f"What is the {noun} of Zzyzx?", value)[0] is False
    assert _check(doc["text"], question(name, kind, noun), other_value)[1] is False
    assert _check(doc["text"], question(name, kind, other_noun), other_value) == (True, True, False)


def test_spoiled_pairs_are_exactly_those_the_checker_rejects() -> None:
    spoiled = rejected = 0
    for doc in PAGES:
        for persona in rule_identify({"key": doc["id"], "text": doc["text"]})["personas"]:
            item = {"key": f"{doc['id']}/{persona}", "text": doc["text"], "persona": persona}
            clean, noisy = rule_generate(item, 0.0), rule_generate(item, 0.3, seed=9)
            labels = rule_check(item | noisy)
            kept = labels["has_context"] and labels["answer_correctness"] and not labels["info_leakage"]
            assert kept == (noisy == clean)
            spoiled += noisy != clean
            rejected += not kept
    assert spoiled == rejected and 0.2 < spoiled / (3 * len(PAGES)) < 0.4


def test_llm_replies_parse_with_fences_and_trailing_commas_and_refuse_garbage() -> None:
    reply = '```json\n{"thought": "ok", "has_context": "Y", "answer_correctness": "yes",'
    reply += '\n "info_leakage": "N",}\n```'
    assert parse("check", parse_json(reply)) == {
        "has_context": True,
        "answer_correctness": True,
        "info_leakage": False,
    }
    assert parse("check", parse_json('{"has_context": "maybe"}')) is None
    assert parse("generate", parse_json('{"question": "", "answer": "x"}')) is None
    assert parse("filter", parse_json("no json here")) is None
    assert parse("identify", parse_json('{"domain": "Math", "personas": ["a", "b", "c", "d"]}'))[
        "personas"
    ] == [
        "a",
        "b",
        "c",
    ]


def test_prompts_carry_the_material_persona_and_demonstrations() -> None:
    item = {"key": "k", "text": PAGES[0]["text"], "persona": "birdwatcher", "domain": "Natural Science"}
    item["examples"] = [{"question": "Q1?", "answer": "A1"}, {"question": "Q2?", "answer": "A2"}]
    content = messages("generate", item)[0]["content"]
    assert PAGES[0]["text"] in content and "birdwatcher" in content and "Question: Q2?\nAnswer: A2" in content
    checked = messages("check", item | {"question": "Q?", "answer": "A"})[0]["content"]
    assert "[Question]\nQ?" in checked and "info_leakage" in checked
