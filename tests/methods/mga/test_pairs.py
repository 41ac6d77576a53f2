"""Genre–audience pairs: the rule generator gives 5 distinct pairs conditioned on the document; an LLM
reply is parsed (duplicates dropped, malformed replies counted by the pipeline, never guessed)."""

from __future__ import annotations

import json
from pathlib import Path

from litlab.lm.chat_models import parse_json
from litlab.methods.mga.grammar import AUDIENCE_BY_KIND, AUDIENCES, GENRES
from litlab.methods.mga.pipeline import run_pipeline
from litlab.methods.mga.stages import LLMBackend, RuleBackend, pair_messages, parse_pairs
from litlab.methods.mga.tasks import fact_documents

DOCS = fact_documents(12, seed=3)


def _pair(genre: str, audience: str) -> dict:
    return {
        "genre": {"title": genre, "description": "d"},
        "audience": {"title": audience, "description": "a"},
    }


def test_rule_pairs_are_five_distinct_known_pairs_led_by_the_kind_s_audiences() -> None:
    backend = RuleBackend()
    for document in DOCS:
        pairs = backend.run("pairs", [{**document, "key": document["id"]}])[0]
        keys = {(p["genre"], p["audience"]) for p in pairs}
        assert len(pairs) == len(keys) == 5
        assert {p["genre"] for p in pairs} == set(GENRES)  # 5 pairs cover the 5 grammars
        assert all(p["audience"] in AUDIENCES and p["genre_description"] for p in pairs)
        assert pairs[0]["audience"] in AUDIENCE_BY_KIND[document["kind"]]
    many = RuleBackend(n_pairs=len(GENRES) * len(AUDIENCES)).pairs({"key": "x", "kind": "city"})
    assert len({(p["genre"], p["audience"]) for p in many}) == len(GENRES) * len(AUDIENCES)


def test_a_reply_is_parsed_with_duplicates_dropped_and_malformed_entries_skipped() -> None:
    reply = {
        "pairs": [_pair("Quiz", "Kids"), _pair("quiz", "kids"), {"genre": "Essay"}, _pair("Essay", "Adults")]
    }
    reply["pairs"].append({"genre": "Poem", "audience": "Poets"})  # bare strings are accepted
    pairs = parse_pairs(parse_json("```json\n" + json.dumps(reply) + "\n```"), 5)
    assert [(p["genre"], p["audience"]) for p in pairs] == [
        ("Quiz", "Kids"),
        ("Essay", "Adults"),
        ("Poem", "Poets"),
    ]
    assert parse_pairs(parse_json("I cannot help with that."), 5) is None
    assert parse_pairs(parse_json('{"pairs": "none"}'), 5) is None
    assert parse_pairs({"pairs": [_pair(f"G{i}", "A") for i in range(9)]}, 5) == parse_pairs(
        {"pairs": [_pair(f"G{i}", "A") for i in range(5)]}, 5
    )
    assert "5 distinct" in pair_messages(DOCS[0], 5)[0]["content"]


class ScriptedChat:
    """A chat model that answers the pair prompt by a script (good, malformed, short) and rewrites by rule."""

    name = "scripted"

    def __init__(self) -> None:
        self.rules = RuleBackend()

    def complete(self, conversations: list) -> list[str]:
        texts = []
        for messages in conversations:
            prompt = messages[0]["content"]
            if prompt.startswith("Rewrite"):
                texts.append("```\nA rewritten text about the source.\n```")
            elif "Ulo" in prompt:
                texts.append("Sorry, no JSON today.")
            else:
                short = "Ka" in prompt
                pairs = [_pair(f"Genre {i}", "Everyone") for i in range(2 if short else 5)]
                texts.append(json.dumps({"analysis": "x", "pairs": pairs + pairs}))
        return texts


def test_malformed_and_short_replies_are_counted_not_silently_dropped(tmp_path: Path) -> None:
    documents = [{"id": "a", "text": "Ulo is a river."}, {"id": "b", "text": "Ka is a city."}]
    documents.append({"id": "c", "text": "Mo is a town."})
    llm = LLMBackend(ScriptedChat())
    result = run_pipeline(documents, {"pairs": llm, "rewrite": llm}, tmp_path, n_pairs=5)
    counts = result["counts"]
    assert counts["pairs_unparseable"] == 1 and counts["pairs_short"] == 1 and counts["pairs"] == 7
    assert counts["rewrites"] == counts["kept"] == 7  # plain text: judged on overlap only
    assert {r["source_id"] for r in result["corpus"]} == {"b", "c"}
    assert result["corpus"][0]["text"] == "A rewritten text about the source."


def test_an_untrained_local_lm_s_replies_are_counted_unparseable(tmp_path: Path) -> None:
    import torch

    from litlab.datamodules.tokenizers import train_bpe, wrap_tokenizer
    from litlab.lm import build_lm, llama_config
    from litlab.lm.chat_models import LocalChat

    torch.manual_seed(0)
    tokenizer = wrap_tokenizer(train_bpe([d["text"] for d in DOCS], 300))
    model = build_lm(llama_config(len(tokenizer), hidden_size=32, num_layers=1, num_heads=2))
    llm = LLMBackend(LocalChat(model, tokenizer, max_new_tokens=8))
    result = run_pipeline(DOCS[:3], {"pairs": llm, "rewrite": RuleBackend()}, tmp_path)
    assert result["counts"]["pairs_unparseable"] == 3 and result["corpus"] == []
