"""The procedural crawl: facts findable only in the documents, read back exactly by the rule stages."""

from __future__ import annotations

from collections import Counter

from litlab.datamodules.webscale_rl import DOMAINS, make_corpus, make_entities
from litlab.methods.webscale_rl.stages import read_facts, read_intro


def test_corpus_is_seeded_and_mixes_pages_with_junk_and_reposts() -> None:
    a, b = make_corpus(60, seed=3), make_corpus(60, seed=3)
    assert a == b and a != make_corpus(60, seed=4)
    sources = Counter(d["source"] for d in a["documents"])
    assert sources["entity"] == 60 and sources["repost"] > 0
    assert sources["boilerplate"] + sources["chatter"] + sources["stub"] == 15
    assert len({d["id"] for d in a["documents"]}) == len(a["documents"])


def test_entities_are_unique_and_span_every_domain() -> None:
    entities = make_entities(100, seed=0)
    assert len({e.name for e in entities}) == 100
    assert {e.domain for e in entities} == {d.name for d in DOMAINS}
    assert all(5 <= len(e.facts) <= 8 and len({n for n, _ in e.facts}) == len(e.facts) for e in entities)


def test_every_fact_is_read_back_exactly_from_every_style() -> None:
    corpus = make_corpus(90, seed=1)
    by_name = {e["name"]: e for e in corpus["entities"]}
    for doc in corpus["documents"]:
        if doc["source"] in ("entity", "repost"):
            name, kind = read_intro(doc["text"])
            entity = by_name[name]
            assert kind == entity["kind"]
            assert [(n, v) for _, n, v in read_facts(doc["text"])] == [tuple(f) for f in entity["facts"]]
        else:
            assert read_facts(doc["text"]) == []


def test_each_evaluation_answer_is_stated_only_in_its_entity_pages() -> None:
    corpus = make_corpus(60, seed=2)
    for item in corpus["eval"]:
        holders = {
            d["source"]
            for d in corpus["documents"]
            if (item["entity"], item["noun"], item["answer"]) in read_facts(d["text"])
        }
        assert holders and holders <= {"entity", "repost"}
        assert item["answer"] not in item["question"]


def test_augmented_crawl_states_each_fact_in_several_phrasings_and_orders() -> None:
    corpus = make_corpus(40, seed=5, pages_per_entity=5, permute=True)
    by_name = {e["name"]: e for e in corpus["entities"]}
    pages: dict[str, list[str]] = {}
    for doc in corpus["documents"]:
        if doc["source"] == "entity":
            pages.setdefault(read_intro(doc["text"])[0], []).append(doc["text"])
    assert set(pages) == set(by_name) and all(len(texts) == 5 for texts in pages.values())
    for name, texts in pages.items():
        facts = [[(n, v) for _, n, v in read_facts(t)] for t in texts]
        assert all(sorted(f) == sorted(map(tuple, by_name[name]["facts"])) for f in facts)
        assert len({t.splitlines()[1].split(name)[0] for t in texts}) == 5  # five introductions' phrasings
    orders = [
        [(n, v) for _, n, v in read_facts(t)] != list(map(tuple, by_name[name]["facts"]))
        for name, texts in pages.items()
        for t in texts
    ]
    assert sum(orders) > len(orders) // 2  # the sentence order is shuffled per page
    assert make_corpus(30, seed=2, pages_per_entity=1) == make_corpus(30, seed=2)  # version 1's crawl
