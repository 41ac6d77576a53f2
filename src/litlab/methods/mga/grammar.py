"""The rule rewriter: five genre grammars (dialogue, quiz, children's story, encyclopedia, news) that state a
document's facts in their own words, and the genre and audience pools the rule pair generator draws from.

Each attribute has two labels (lexical variation) and a cue pattern the consistency parser uses to find the
sentence that states it; every grammar states one fact per line so that a fact and its cue stay together.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

# attribute → (labels, cue regex); a label names the attribute in a rewrite, the cue finds it again.
ATTRIBUTES: dict[str, tuple[tuple[str, str], str]] = {
    "birth_year": (("year of birth", "birth year"), r"\bbirth\b"),
    "birthplace": (("home town", "place of birth"), r"\bhome town\b|\bplace of birth\b"),
    "occupation": (("profession", "line of work"), r"\bprofession\b|\bline of work\b"),
    "employer": (("workplace", "employing firm"), r"\bworkplace\b|\bemploying firm\b"),
    "color": (("signature colour", "chosen colour"), r"\bcolou?r\b"),
    "height": (("height in centimetres", "stature in centimetres"), r"\bheight\b|\bstature\b"),
    "pet": (("animal companion", "household animal"), r"\banimal\b"),
    "instrument": (("musical instrument", "instrument of choice"), r"\binstrument\b"),
    "country": (("nation", "home country"), r"\bnation\b|\bcountry\b"),
    "population": (("head count of residents", "number of residents"), r"\bresidents\b"),
    "founded": (("founding year", "year of its founding"), r"\bfounding\b"),
    "river": (("local river", "river of the place"), r"\briver\b"),
    "climate": (("weather", "usual weather"), r"\bweather\b"),
    "landmark": (("famous sight", "best-known sight"), r"\bsight\b"),
    "mayor": (("town leader", "elected leader"), r"\bleader\b"),
    "headquarters": (("head office", "main office"), r"\boffice\b"),
    "industry": (("trade", "business sector"), r"\btrade\b|\bsector\b"),
    "employees": (("staff size", "number of staff"), r"\bstaff\b"),
    "product": (("flagship goods", "best-selling goods"), r"\bgoods\b"),
    "founder": (("creator", "original creator"), r"\bcreator\b"),
}

GENRES: dict[str, str] = {
    "dialogue": "a conversation between two people who talk the facts through, question and reply",
    "quiz": "numbered questions, each followed by its answer, for self-testing",
    "children's story": "a simple bedtime story told in short, warm sentences",
    "encyclopedia": "a neutral reference entry, one labelled fact per line",
    "news": "a short news report that attributes each fact to a source",
}
AUDIENCES: dict[str, str] = {
    "young children": "five to eight years old, short words, a friendly tone",
    "high-school students": "revising for a test, want facts they can recall",
    "general readers": "curious adults without special knowledge",
    "travellers": "planning a visit, want practical facts",
    "investors": "judging an organisation, want numbers first",
    "historians": "care about dates and origins",
    "language learners": "reading simple English, want plain sentences",
}
# the audiences a document's kind suggests first (the pair generator conditions on the document)
AUDIENCE_BY_KIND = {
    "person": ("historians", "high-school students", "young children"),
    "city": ("travellers", "historians", "language learners"),
    "company": ("investors", "general readers", "high-school students"),
}

_DIALOGUE_NAMES = (("Ana", "Ben"), ("Mira", "Tom"), ("Lio", "Sara"), ("Kai", "Nora"))
_OPENERS = {
    "young children": "Here is a little story for you.",
    "high-school students": "Revision notes follow.",
    "general readers": "Read on for the essentials.",
    "travellers": "Planning a trip? Start here.",
    "investors": "Key figures at a glance.",
    "historians": "A record for the archive.",
    "language learners": "Easy English reading.",
}


def _line(genre: str, rng: random.Random, name: str, label: str, value: str, index: int, who: tuple) -> str:
    """One fact stated in ``genre``'s grammar, with a randomly chosen frame (the lexical variation)."""
    frames = {
        "dialogue": (
            f"{who[0]}: Tell me the {label} of {name}? {who[1]}: It is {value}, I am sure.",
            f"{who[0]}: And what about the {label}? {who[1]}: {value}, if I remember right.",
        ),
        "quiz": (
            f"Q{index}: Name the {label} of {name}? Answer: {value}",
            f"Q{index}: Which is the {label} here? Solution: {value}",
        ),
        "children's story": (
            f"Guess what the {label} was? It was {value}!",
            f"Everybody knew that the {label} was {value}, and they smiled.",
        ),
        "encyclopedia": (f"{label.capitalize()}: {value}", f"- {label.capitalize()} — {value}"),
        "news": (
            f"Sources confirm the {label} is {value}, officials said.",
            f"According to records, the {label} stands at {value}.",
        ),
    }[genre]
    return rng.choice(frames)


def rewrite(
    genre: str, audience: str, name: str, kind: str, facts: Sequence[tuple[str, str]], seed: int
) -> str:
    """``facts`` of entity ``name`` as a ``genre`` text for ``audience``, in a seeded random fact order."""
    rng = random.Random(seed)
    facts = list(facts)
    rng.shuffle(facts)
    who = rng.choice(_DIALOGUE_NAMES)
    head = {
        "dialogue": f"{who[0]} and {who[1]} are talking about {name}, a {kind}.",
        "quiz": f"Quiz time: how well do you know {name}?",
        "children's story": f"Once upon a time there was a {kind} called {name}.",
        "encyclopedia": f"{name} ({kind})",
        "news": f"NEWS: new details emerge about {name}.",
    }[genre]
    lines = [_OPENERS.get(audience, "Read on."), head]
    for index, (key, value) in enumerate(facts, 1):
        label = rng.choice(ATTRIBUTES[key][0])
        lines.append(_line(genre, rng, name, label, value, index, who))
    return "\n".join(lines)
