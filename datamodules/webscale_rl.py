"""Procedural web-like documents for the Webscale-RL pipeline, and their held-out closed-book questions.

Every fact is about an invented entity (a made-up name, 5–8 attributes drawn from fixed pools), so it can
be known only from the documents. Five domain families (the paper's domain list) each have their own entity
kind and attributes; each document states its facts in one of three styles (encyclopedia, news, forum),
or, with knowledge augmentation, each entity has several pages in five styles with the facts shuffled.
The corpus mixes in what a web crawl holds and a pipeline must drop: boilerplate pages, fact-free chatter,
too-short stubs, and reposts (the same page with another footer: near-duplicate QA downstream).

The evaluation set asks, closed-book, about one held-out attribute of each entity (the fact is in the
documents; a QA pipeline that copies it into training data contaminates the benchmark).
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, replace

VERSION = "2"
STYLES = ("encyclopedia", "news", "forum")  # a single page per entity draws from these (version 1's crawl)
ALL_STYLES = (*STYLES, "catalog", "blog")  # knowledge augmentation: several pages draw from all five
_SENTENCE = {
    "encyclopedia": "The {noun} of {name} is {value}.",
    "news": "Officials confirmed on Monday that the {noun} of {name} is {value}.",
    "forum": "fun fact for the thread: the {noun} of {name} is {value}!",
    "catalog": "Registry entry for {name}: {noun} is {value}.",
    "blog": "I looked it up, and for {name} the {noun} is {value}.",
}
_INTRO = {
    "encyclopedia": "{name} is a {kind}.",
    "news": "A report this week covered {name}, a {kind}.",
    "forum": "ok so {name} is a {kind}, hear me out.",
    "catalog": "Catalog record: {name}, {kind}.",
    "blog": "Today I am writing about {name}, which is a {kind}.",
}
_SYLLABLES = ("ka", "lo", "mi", "ren", "to", "va", "sel", "dor", "bri", "nu", "pe", "zan", "quo", "fi", "gar")


@dataclass(frozen=True)
class Domain:
    """A template family: the entity ``kind``, attributes ``{noun: value pool}``, the personas who ask."""

    name: str
    kind: str
    attributes: dict[str, tuple[str, ...]]
    personas: tuple[str, ...]


def _pool(*words: str) -> tuple[str, ...]:
    return tuple(words)


def _years(low: int, high: int, step: int = 1) -> tuple[str, ...]:
    return tuple(str(y) for y in range(low, high, step))


DOMAINS: tuple[Domain, ...] = (
    Domain(
        "Natural Science",
        "bird species",
        {
            "habitat": _pool(
                "mossy cliffs", "salt marshes", "pine forests", "river deltas", "alpine meadows"
            ),
            "diet": _pool("seeds", "beetles", "small fish", "nectar", "snails", "berries"),
            "plumage colour": _pool("slate grey", "copper red", "pale yellow", "deep blue", "olive green"),
            "clutch size": _pool("2", "3", "4", "5", "6", "7"),
            "wingspan in centimetres": _years(18, 90, 3),
            "year of first description": _years(1760, 1990, 7),
            "migration month": _pool("March", "April", "May", "August", "September", "October"),
            "conservation status": _pool("least concern", "near threatened", "vulnerable", "endangered"),
        },
        ("birdwatcher", "biology student", "conservation officer"),
    ),
    Domain(
        "Commerce & Economics",
        "trading company",
        {
            "founding year": _years(1850, 2015, 3),
            "headquarters city": _pool("Brenmoor", "Tallivar", "Osk", "Pellamy", "Quenford", "Ravos"),
            "main product": _pool(
                "copper wire", "canned fruit", "wool yarn", "glass bottles", "bicycle parts"
            ),
            "number of employees": _years(40, 9000, 137),
            "stock ticker": _pool("KLV", "MRQ", "TZN", "BOR", "PLX", "WEN", "DAC"),
            "chief executive": _pool("Ada Venn", "Milo Strand", "Iris Kade", "Tomas Holt", "Nora Pike"),
            "annual revenue in millions": _years(3, 900, 11),
            "largest market": _pool("Norway", "Chile", "Kenya", "Japan", "Canada", "Portugal"),
        },
        ("investor", "economics student", "supplier"),
    ),
    Domain(
        "Travel & Lifestyle",
        "mountain town",
        {
            "famous dish": _pool(
                "barley stew", "smoked trout", "walnut bread", "plum dumplings", "goat cheese"
            ),
            "festival month": _pool("January", "February", "June", "July", "November", "December"),
            "elevation in metres": _years(600, 2900, 57),
            "nearest river": _pool("Ambra", "Soleth", "Vint", "Korra", "Mell", "Dask"),
            "population": _years(300, 40000, 913),
            "founding century": _pool("11th", "12th", "13th", "14th", "15th", "16th"),
            "main sport": _pool("skiing", "rowing", "climbing", "curling", "cycling"),
            "twin town": _pool("Harlow", "Verden", "Sintra", "Ohrid", "Bled", "Tarvis"),
        },
        ("backpacker", "food writer", "travel agent"),
    ),
    Domain(
        "Medicine & Health",
        "experimental drug",
        {
            "target condition": _pool("migraine", "asthma", "gout", "psoriasis", "insomnia", "anaemia"),
            "daily dose in milligrams": _years(5, 800, 15),
            "approval year": _years(1961, 2024, 2),
            "main side effect": _pool("dry mouth", "dizziness", "nausea", "fatigue", "headache", "rash"),
            "developer lab": _pool("Halvern Labs", "Cobalt Bio", "Ostrey Institute", "Meridan Pharma"),
            "trial size": _years(40, 4000, 71),
            "half-life in hours": _years(2, 70, 2),
            "delivery form": _pool("tablet", "inhaler", "patch", "injection", "syrup"),
        },
        ("pharmacist", "patient", "medical student"),
    ),
    Domain(
        "Tech & Engineering",
        "network protocol",
        {
            "inventor": _pool("Lena Frost", "Oskar Baird", "Priya Nand", "Jules Marek", "Hana Oda"),
            "release year": _years(1971, 2024, 2),
            "default port": _years(1024, 9000, 173),
            "maximum speed in megabits": _years(10, 4000, 89),
            "transport layer": _pool("UDP", "TCP", "QUIC", "SCTP"),
            "licence": _pool("MIT", "BSD", "GPL", "Apache", "proprietary"),
            "maintainer group": _pool("Kestrel Foundation", "Open Relay Group", "Tessel Consortium"),
            "encryption cipher": _pool("AES", "ChaCha20", "Twofish", "Serpent", "Camellia"),
        },
        ("network engineer", "computer science student", "security auditor"),
    ),
)
DOMAIN_BY_KIND = {d.kind: d for d in DOMAINS}
BOILERPLATE = (
    "We use cookies to improve your experience. Accept all cookies?",
    "Subscribe to our newsletter for weekly updates.",
    "Click here to log in or create an account.",
    "All rights reserved. Terms of use. Privacy policy.",
    "Share this page on social media.",
)
_CHATTER = (
    "I honestly think weekends are too short and Mondays come too fast.",
    "Does anyone else feel like the weather has been strange lately?",
    "My cat knocked a glass off the table again this morning.",
    "Coffee tastes better when someone else makes it, in my opinion.",
    "Not sure what to cook tonight, maybe something with rice.",
    "Traffic on the way home was unbelievable today.",
)


@dataclass(frozen=True)
class FactEntity:
    """An invented entity: its domain, and its facts ``(noun, value)`` in document order."""

    name: str
    domain: str
    kind: str
    facts: tuple[tuple[str, str], ...]


def question(entity_name: str, kind: str, noun: str) -> str:
    """The closed-book form of a fact question: a background clause naming the entity, then the ask."""
    return f"{entity_name} is a {kind}. What is the {noun} of {entity_name}?"


def fact_sentence(style: str, name: str, noun: str, value: str) -> str:
    return _SENTENCE[style].format(noun=noun, name=name, value=value)


def fact_pattern(style: str) -> re.Pattern[str]:
    """The regex that reads a style's fact sentences back: groups ``noun``, ``name``, ``value``."""
    template = re.escape(_SENTENCE[style]).replace(r"\{noun\}", "(?P<noun>[a-z -]+?)")
    template = template.replace(r"\{name\}", "(?P<name>[A-Z][a-z]+)")
    return re.compile(template.replace(r"\{value\}", "(?P<value>[^.!]+?)"))


def intro_pattern(style: str) -> re.Pattern[str]:
    """The regex of a style's introduction sentence: groups ``name``, ``kind``."""
    template = re.escape(_INTRO[style]).replace(r"\{name\}", "(?P<name>[A-Z][a-z]+)")
    return re.compile(template.replace(r"\{kind\}", "(?P<kind>[a-z ]+?)"))


def _name(rng: random.Random, taken: set[str]) -> str:
    while (name := "".join(rng.choice(_SYLLABLES) for _ in range(3)).capitalize()) in taken:
        pass
    taken.add(name)
    return name


def make_entities(n: int, seed: int) -> list[FactEntity]:
    """``n`` entities with unique three-syllable names, domains in rotation, 5–8 facts each."""
    rng, taken = random.Random(seed), set()
    entities = []
    for index in range(n):
        domain = DOMAINS[index % len(DOMAINS)]
        nouns = rng.sample(list(domain.attributes), rng.randint(5, 8))
        facts = tuple((noun, rng.choice(domain.attributes[noun])) for noun in nouns)
        entities.append(FactEntity(_name(rng, taken), domain.name, domain.kind, facts))
    return entities


def entity_document(entity: FactEntity, style: str, rng: random.Random, boilerplate: int = 0) -> str:
    """A page about ``entity`` in ``style``: title, introduction, one sentence per fact, some boilerplate."""
    lines = [entity.name, _INTRO[style].format(name=entity.name, kind=entity.kind)]
    lines += [fact_sentence(style, entity.name, noun, value) for noun, value in entity.facts]
    lines += rng.sample(BOILERPLATE, boilerplate)
    return "\n".join(lines)


def _entity_pages(entity: FactEntity, rng: random.Random, pages: int, permute: bool) -> list[str]:
    """``pages`` pages about ``entity``, each in another of the five styles, the fact sentences shuffled
    per page if ``permute`` (Allen-Zhu & Li's "multi5 + permute" knowledge augmentation)."""
    texts = []
    for style in rng.sample(ALL_STYLES, pages):
        facts = rng.sample(entity.facts, len(entity.facts)) if permute else entity.facts
        texts.append(entity_document(replace(entity, facts=tuple(facts)), style, rng, rng.randint(0, 2)))
    return texts


def make_corpus(
    n_entities: int = 200,
    seed: int = 0,
    repost_rate: float = 0.15,
    noise_rate: float = 0.25,
    pages_per_entity: int = 1,
    permute: bool = False,
) -> dict[str, list[dict]]:
    """The crawl and its benchmark: ``{"documents": [{id, text, source}], "eval": [{id, question, answer,
    entity, noun}], "entities": [...]}``.

    One page per entity (random style; or ``pages_per_entity`` pages, each in another of five styles, fact
    order shuffled per page if ``permute``: every fact in several phrasings and sentence orders);
    ``repost_rate`` of the entities' first pages re-posted with a different footer; ``noise_rate`` ×
    n_entities junk pages (boilerplate only, chatter, stubs). The pages are shuffled. Each entity's last
    fact is held out as its closed-book evaluation question.
    """
    rng = random.Random(seed + 7919)
    entities = make_entities(n_entities, seed)
    pages: list[tuple[str, str]] = []
    for entity in entities:
        if pages_per_entity > 1 or permute:
            texts = _entity_pages(entity, rng, pages_per_entity, permute)
            pages += [("entity", text) for text in texts]
            if rng.random() < repost_rate:
                pages.append(("repost", texts[0] + "\nReposted by a reader."))
            continue
        style = rng.choice(STYLES)
        pages.append(("entity", entity_document(entity, style, rng, rng.randint(0, 2))))
        if rng.random() < repost_rate:
            pages.append(("repost", entity_document(entity, style, rng, 1) + "\nReposted by a reader."))
    for index in range(int(noise_rate * n_entities)):
        kind = ("boilerplate", "chatter", "stub")[index % 3]
        if kind == "boilerplate":
            text = "\n".join(rng.sample(BOILERPLATE, 4))
        elif kind == "chatter":
            text = "\n".join(rng.sample(_CHATTER, 4))
        else:
            entity = rng.choice(entities)
            text = f"{entity.name}\nMore soon."
        pages.append((kind, text))
    rng.shuffle(pages)
    documents = [{"id": f"doc{i:06d}", "text": text, "source": kind} for i, (kind, text) in enumerate(pages)]
    evaluation = [
        {
            "id": f"eval{i:05d}",
            "question": question(e.name, e.kind, e.facts[-1][0]),
            "answer": e.facts[-1][1],
            "entity": e.name,
            "noun": e.facts[-1][0],
        }
        for i, e in enumerate(entities)
    ]
    records = [
        {"name": e.name, "domain": e.domain, "kind": e.kind, "facts": [list(f) for f in e.facts]}
        for e in entities
    ]
    return {"documents": documents, "eval": evaluation, "entities": records}
