"""Text for the tiny language models: tinyshakespeare, procedural corpora, JSONL documents, mixtures of
them, tokenisation with exact byte counts, packing with document ids, streaming.

- ``tinyshakespeare``: ``data/text/tinyshakespeare.txt`` (about 1.1 MB of plays, shipped), found through
  ``root`` → ``$LITLAB_DATA_ROOT/text`` → the shipped ``litlab.data`` copy.
- Procedural corpora, seeded and cached as JSONL: ``entities`` (synthetic people, cities and companies with
  5–8 attributes), ``arithmetic`` (chains of +, −, × with every intermediate result), ``prontoqa``
  (ProntoQA-style syllogism chains with distractors and a gold proof), ``mixed`` (a third of each).
- ``<path>.jsonl``: one JSON object per line with a text field (``text_field``); other fields are kept.
- Any other UTF-8 file by path; ``streaming=True`` reads it chunk by chunk through ``mmap``.
- Several of the above with ``weights``: each training epoch holds each source in that share of blocks,
  drawn anew every epoch.

Batches are dicts of ``(B, T)`` tensors: ``input_ids``, ``labels`` (a separate copy, unshifted, HF
convention; -100 is ignored), ``byte_counts`` (the UTF-8 bytes of the text each token accounts for, exact
for any tokenizer) and ``doc_ids`` (the index of each token's document in ``TextDataModule.documents``).
Text files are split by bytes (train | val | test) at line breaks, documents by index; the tokenizer is
trained on the train split only and cached (``litlab.datamodules.tokenizers.cached_bpe``).
"""

from __future__ import annotations

import itertools
import json
import math
import mmap
import os
import random
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import torch
from tokenizers import pre_tokenizers
from torch.utils.data import DataLoader, Dataset, IterableDataset, Sampler, get_worker_info
from transformers import PreTrainedTokenizerBase

from litlab.core.cache import write_atomic
from litlab.core.errors import ConfigError, LitlabError
from litlab.core.paths import DATA_ROOT_ENV, data_root_candidates
from litlab.datamodules.base import GlobalBatchDataModule, batch_collate, batch_loader
from litlab.datamodules.tokenizers import byte_counts, cached_bpe, default_cache_dir, load_tokenizer

# Label of positions that no loss is computed on (PyTorch's cross-entropy ignore_index).
IGNORE_INDEX = -100

NAMED_FILES = {"tinyshakespeare": "tinyshakespeare.txt"}
TINYSHAKESPEARE_URL = (
    "https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt"
)
PROCEDURAL_KINDS = ("entities", "arithmetic", "prontoqa", "mixed")
# Part of the procedural cache key: bump it whenever a generator's output changes.
PROCEDURAL_FORMAT = 2
SPLITS = ("train", "val", "test")


# ----------------------------------------------------------------------------------------------- files
def text_file(name: str, root: str | os.PathLike | None = None) -> Path:
    """The path of a named corpus file (``tinyshakespeare``) or of ``name`` itself if it is a file.

    Folders are tried in order: ``root`` if given (only it), else ``$LITLAB_DATA_ROOT/text``, else the
    shipped copy; a FileNotFoundError says what to do otherwise.
    """
    if Path(name).expanduser().is_file():
        return Path(name).expanduser()
    filename = NAMED_FILES.get(name, name)
    folders = [Path(root).expanduser()] if root is not None else data_root_candidates("text")
    for folder in folders:
        if (folder / filename).is_file():
            return folder / filename
    hint = f" (it is published at {TINYSHAKESPEARE_URL})" if name == "tinyshakespeare" else ""
    raise FileNotFoundError(
        f"{filename} not found; looked in: {', '.join(str(f) for f in folders)}. Set data.root=<folder with "
        f"{filename}> or export {DATA_ROOT_ENV}=<data folder with a text/ subfolder>{hint}."
    )


def _printable(byte: int) -> bool:
    return 0x21 <= byte <= 0x7E


def find_boundary(data: bytes | mmap.mmap, pos: int, end: int, window: int = 1 << 20) -> int:
    """The first split point ≥ ``pos`` just after a newline with printable ASCII on both sides, or ``end``.

    The GPT-2 pre-tokeniser never joins anything across such a newline, so encoding the pieces separately
    gives exactly the tokens of the whole. Text with no such line break within ``window`` bytes is cut at a
    UTF-8 character start instead (the only place where chunked encoding may differ).
    """
    if pos <= 0:
        return 0
    if pos >= end:
        return end
    limit = min(end, pos + window)
    search = pos - 1
    while (newline := data.find(b"\n", search, limit)) >= 0:
        if (
            newline > 0
            and newline + 1 < end
            and _printable(data[newline - 1])
            and _printable(data[newline + 1])
        ):
            return newline + 1
        search = newline + 1
    if limit >= end:
        return end
    while limit > pos and (data[limit] & 0xC0) == 0x80:
        limit -= 1
    return limit


def split_offsets(data: bytes | mmap.mmap, fractions: Sequence[float]) -> list[int]:
    """Byte offsets ``[0, o1, ..., len]`` cutting ``data`` into consecutive parts of the given fractions."""
    total, offsets, cumulative = len(data), [0], 0.0
    for fraction in fractions[:-1]:
        cumulative += fraction
        offsets.append(max(offsets[-1], find_boundary(data, round(cumulative * total), total)))
    offsets.append(total)
    return offsets


def chunk_offsets(data: bytes | mmap.mmap, start: int, end: int, chunk_bytes: int) -> list[int]:
    """Boundaries ``[start, ..., end]`` of about ``chunk_bytes`` each, at ``find_boundary`` split points."""
    offsets = [start]
    while offsets[-1] < end:
        offsets.append(max(offsets[-1] + 1, find_boundary(data, offsets[-1] + chunk_bytes, end)))
    return offsets


def splits_exactly(tokenizer: PreTrainedTokenizerBase) -> bool:
    """True for GPT-2-style byte-level tokenizers (no normaliser, ByteLevel regex pre-tokeniser), whose
    encodings of text cut at ``find_boundary`` points concatenate to the encoding of the whole."""
    backend = tokenizer.backend_tokenizer
    pre = backend.pre_tokenizer
    return backend.normalizer is None and isinstance(pre, pre_tokenizers.ByteLevel) and pre.use_regex


# -------------------------------------------------------------------------------------------- encoding
@dataclass
class TokenStream:
    """The tokens of a corpus split, ``(n,)`` each: ids, the UTF-8 bytes of text each token accounts for
    (0 for added separators), and the index of the document each token belongs to."""

    ids: torch.Tensor
    byte_counts: torch.Tensor
    doc_ids: torch.Tensor

    def __len__(self) -> int:
        return len(self.ids)

    @staticmethod
    def cat(streams: Sequence[TokenStream]) -> TokenStream:
        """The streams one after the other."""
        return TokenStream(*(torch.cat([getattr(s, f.name) for s in streams]) for f in fields(TokenStream)))

    def __getitem__(self, index: slice) -> TokenStream:
        return TokenStream(self.ids[index], self.byte_counts[index], self.doc_ids[index])

    def pack(self, block_size: int) -> dict[str, torch.Tensor]:
        """``input_ids``, ``byte_counts``, ``doc_ids`` of ``(n // block_size, block_size)``: consecutive
        non-overlapping blocks (the remainder is dropped), each token keeping its bytes and document."""
        return {
            "input_ids": pack_blocks(self.ids, block_size),
            "byte_counts": pack_blocks(self.byte_counts, block_size),
            "doc_ids": pack_blocks(self.doc_ids, block_size),
        }


def encode_bytes(
    tokenizer: PreTrainedTokenizerBase,
    data: bytes | mmap.mmap,
    start: int,
    end: int,
    chunk_bytes: int = 1 << 16,
    doc_id: int = 0,
) -> TokenStream:
    """The tokens of ``data[start:end]`` decoded as UTF-8 (one document, ``doc_id``); byte-level BPEs are
    encoded in parallel chunks (exactly the tokens of the whole range, see ``find_boundary``), others in
    one piece."""
    offsets = chunk_offsets(data, start, end, chunk_bytes) if splits_exactly(tokenizer) else [start, end]
    texts = [bytes(data[a:b]).decode("utf-8") for a, b in itertools.pairwise(offsets)]
    stream = encode_texts(tokenizer, texts)
    return TokenStream(stream.ids, stream.byte_counts, torch.full_like(stream.ids, doc_id))


def encode_texts(
    tokenizer: PreTrainedTokenizerBase, texts: Sequence[str], eos_id: int | None = None, first_doc: int = 0
) -> TokenStream:
    """The concatenated tokens of ``texts`` (batch-encoded in Rust), each followed by ``eos_id`` when one is
    given (the document separator of packed pretraining); text i is document ``first_doc + i``."""
    if not texts:
        empty = torch.zeros(0, dtype=torch.long)
        return TokenStream(empty, empty, empty)
    encodings = tokenizer.backend_tokenizer.encode_batch(list(texts), add_special_tokens=False)
    counts = byte_counts(tokenizer, texts, encodings)
    separator = [eos_id] if eos_id is not None else []
    ids = torch.tensor(list(itertools.chain.from_iterable(e.ids + separator for e in encodings)))
    if separator:
        counts = [torch.cat([c, torch.zeros(1, dtype=torch.long)]) for c in counts]
    lengths = torch.tensor([len(c) for c in counts])
    doc_ids = torch.arange(first_doc, first_doc + len(texts)).repeat_interleave(lengths)
    return TokenStream(ids.long(), torch.cat(counts).long(), doc_ids)


def pack_blocks(ids: torch.Tensor, block_size: int) -> torch.Tensor:
    """``(n // block_size, block_size)``: consecutive non-overlapping blocks; the remainder is dropped."""
    n_blocks = len(ids) // block_size
    return ids[: n_blocks * block_size].view(n_blocks, block_size)


def encode_prompt_completion(
    tokenizer: PreTrainedTokenizerBase,
    prompts: Sequence[str],
    completions: Sequence[str],
    max_length: int,
    add_eos: bool = True,
) -> dict[str, torch.Tensor]:
    """Right-padded ``input_ids``, ``attention_mask``, ``labels`` and ``byte_counts`` ``(N, max_length)``
    for fine-tuning on completions: labels are -100 on the prompt and the padding, so only completion
    tokens are learned.

    Prompt and completion are encoded separately and concatenated (sequences are truncated on the right).
    """
    if len(prompts) != len(completions):
        raise ValueError(f"{len(prompts)} prompts but {len(completions)} completions")
    backend = tokenizer.backend_tokenizer
    prompt_ids = [e.ids for e in backend.encode_batch(list(prompts), add_special_tokens=False)]
    encodings = backend.encode_batch(list(completions), add_special_tokens=False)
    eos = [tokenizer.eos_token_id] if add_eos else []
    completion_ids = [e.ids + eos for e in encodings]
    completion_bytes = [c.tolist() + [0] * len(eos) for c in byte_counts(tokenizer, completions, encodings)]
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    input_ids = torch.full((len(prompts), max_length), pad, dtype=torch.long)
    labels = torch.full((len(prompts), max_length), IGNORE_INDEX, dtype=torch.long)
    attention = torch.zeros((len(prompts), max_length), dtype=torch.long)
    counts = torch.zeros((len(prompts), max_length), dtype=torch.long)
    for row, (p, c, b) in enumerate(zip(prompt_ids, completion_ids, completion_bytes)):
        sequence = (p + c)[:max_length]
        input_ids[row, : len(sequence)] = torch.tensor(sequence)
        attention[row, : len(sequence)] = 1
        labels[row, len(p) : len(sequence)] = input_ids[row, len(p) : len(sequence)]
        kept = b[: max(0, len(sequence) - len(p))]
        counts[row, len(p) : len(sequence)] = torch.tensor(kept, dtype=torch.long)
    return {"input_ids": input_ids, "attention_mask": attention, "labels": labels, "byte_counts": counts}


def read_jsonl(path: str | os.PathLike, text_field: str = "text") -> list[dict[str, Any]]:
    """The records of a JSONL file (one JSON object per line, blank lines skipped), each with a string
    ``text_field``; a bad line is a LitlabError naming the file and line."""
    records = []
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as error:
                raise LitlabError(f"{path}:{number}: not a JSON object ({error.msg})") from None
            if not isinstance(record, dict) or not isinstance(record.get(text_field), str):
                raise LitlabError(
                    f"{path}:{number}: each line needs a string field {text_field!r} (set data.text_field)"
                )
            records.append(record)
    if not records:
        raise LitlabError(f"{path} holds no JSONL records")
    return records


# ------------------------------------------------------------------------------------ procedural text
_SYLLABLES = (
    "ka", "lo", "mi", "ra", "ven", "tor", "sel", "dan", "qui", "bar", "nel", "zo", "fi", "gor",
    "thal", "is", "mun", "pra", "dre", "oth", "al", "ek", "ur", "yn", "bel", "cas", "dor", "hal",
)  # fmt: skip
_POOLS = {
    "occupation": ("baker", "chemist", "sailor", "painter", "judge", "farmer", "teacher", "architect",
                   "surgeon", "poet", "engineer", "librarian"),
    "color": ("red", "blue", "green", "amber", "violet", "silver", "black", "white", "orange", "teal"),
    "pet": ("cat", "dog", "parrot", "tortoise", "ferret", "goat", "owl", "rabbit"),
    "instrument": ("violin", "flute", "drum", "harp", "cello", "piano", "lute", "horn"),
    "climate": ("rainy", "dry", "cold", "mild", "humid", "windy"),
    "landmark": ("a stone bridge", "an old lighthouse", "a glass tower", "a great library", "a salt lake",
                 "a clock tower", "a marble arena"),
    "industry": ("shipping", "textiles", "mining", "software", "farming", "glassmaking", "printing",
                 "banking"),
    "product": ("lanterns", "engines", "maps", "bicycles", "clocks", "telescopes", "boots", "paper"),
}  # fmt: skip
# kind → attribute → (statement template, question template); {name} is the entity, {value} the answer.
_SCHEMAS: dict[str, dict[str, tuple[str, str]]] = {
    "person": {
        "birth_year": ("{name} was born in {value}.", "In which year was {name} born?"),
        "birthplace": ("{name} was born in the city of {value}.", "In which city was {name} born?"),
        "occupation": ("{name} works as a {value}.", "What is the occupation of {name}?"),
        "employer": ("{name} is employed by {value}.", "Which company employs {name}?"),
        "color": ("The favourite colour of {name} is {value}.", "What is the favourite colour of {name}?"),
        "height": ("{name} is {value} centimetres tall.", "How many centimetres tall is {name}?"),
        "pet": ("{name} keeps a {value} as a pet.", "Which animal does {name} keep as a pet?"),
        "instrument": ("{name} plays the {value}.", "Which instrument does {name} play?"),
    },
    "city": {
        "country": ("{name} is a city in {value}.", "In which country is the city of {name}?"),
        "population": ("{name} has {value} inhabitants.", "How many inhabitants does {name} have?"),
        "founded": ("{name} was founded in {value}.", "In which year was {name} founded?"),
        "river": ("The river {value} flows through {name}.", "Which river flows through {name}?"),
        "climate": ("The climate of {name} is {value}.", "What is the climate of {name} like?"),
        "landmark": ("{name} is known for {value}.", "What is {name} known for?"),
        "mayor": ("The mayor of {name} is {value}.", "Who is the mayor of {name}?"),
    },
    "company": {
        "founded": ("{name} was founded in {value}.", "In which year was {name} founded?"),
        "headquarters": ("{name} has its headquarters in {value}.", "Where are the headquarters of {name}?"),
        "industry": ("{name} works in {value}.", "In which industry does {name} work?"),
        "employees": ("{name} employs {value} people.", "How many people does {name} employ?"),
        "product": ("{name} is best known for its {value}.", "What is {name} best known for making?"),
        "founder": ("{name} was founded by {value}.", "Who founded {name}?"),
        "color": ("The logo of {name} is {value}.", "What colour is the logo of {name}?"),
    },
}


@dataclass(frozen=True)
class Entity:
    """A synthetic entity (person, city or company) with 5–8 named attributes, all strings."""

    name: str
    kind: str
    attributes: tuple[tuple[str, str], ...]

    @property
    def text(self) -> str:
        """One sentence per attribute in a fixed base style (the document other methods rewrite or probe)."""
        schema = _SCHEMAS[self.kind]
        return " ".join(schema[key][0].format(name=self.name, value=value) for key, value in self.attributes)

    def questions(self) -> list[tuple[str, str]]:
        """``(question, answer)`` for every attribute: closed-book probes of what the document states."""
        schema = _SCHEMAS[self.kind]
        return [(schema[key][1].format(name=self.name), value) for key, value in self.attributes]


def _word(rng: random.Random, low: int = 2, high: int = 3) -> str:
    return "".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(low, high))).capitalize()


MAX_NAME_TRIES = 100_000  # draws of one name before the name space counts as used up


def _unique(rng: random.Random, make: Callable[[random.Random], str], taken: set[str]) -> str:
    """A name from ``make`` not in ``taken`` (then added); a ConfigError, not a hang, once none is left."""
    for _ in range(MAX_NAME_TRIES):
        if (name := make(rng)) not in taken:
            taken.add(name)
            return name
    raise ConfigError(
        f"the procedural entity world ran out of unique names after {len(taken)}: it holds about 10,000 "
        "entities (30,000 mixed documents); ask for fewer documents"
    )


def make_entities(n: int, seed: int) -> list[Entity]:
    """``n`` entities with unique names, kinds in rotation (person, city, company), 5–8 attributes each.

    Attributes that name a person, city or company (employer, mayor, headquarters ...) point at entities of
    the same world, so the corpus is one consistent knowledge base.
    """
    rng, taken = random.Random(seed), set()
    n_people, n_cities, n_companies = (max(1, len(range(kind, n, 3))) for kind in range(3))
    people = [_unique(rng, lambda r: f"{_word(r)} {_word(r)}", taken) for _ in range(n_people)]
    cities = [_unique(rng, _word, taken) for _ in range(n_cities)]
    suffixes = ("Works", "Group", "Company")
    companies = [
        _unique(rng, lambda r: f"{_word(r)} {r.choice(suffixes)}", taken) for _ in range(n_companies)
    ]
    countries = [_unique(rng, lambda r: _word(r, 3, 4), taken) for _ in range(12)]
    rivers = [_unique(rng, lambda r: _word(r, 2, 2), taken) for _ in range(20)]
    values = {
        "birth_year": lambda: str(rng.randint(1800, 2005)),
        "founded": lambda: str(rng.randint(1100, 1990)),
        "birthplace": lambda: rng.choice(cities),
        "headquarters": lambda: rng.choice(cities),
        "employer": lambda: rng.choice(companies),
        "mayor": lambda: rng.choice(people),
        "founder": lambda: rng.choice(people),
        "country": lambda: rng.choice(countries),
        "river": lambda: rng.choice(rivers),
        "height": lambda: str(rng.randint(140, 205)),
        "population": lambda: str(rng.randint(2, 900) * 1000),
        "employees": lambda: str(rng.randint(5, 5000)),
        **{key: (lambda pool=pool: rng.choice(pool)) for key, pool in _POOLS.items()},
    }
    entities = []
    for index in range(n):
        kind = ("person", "city", "company")[index % 3]
        name = {"person": people, "city": cities, "company": companies}[kind][index // 3]
        keys = list(_SCHEMAS[kind])
        chosen = rng.sample(keys, rng.randint(5, min(10, len(keys))))
        entities.append(Entity(name, kind, tuple((key, values[key]()) for key in chosen)))
    return entities


@dataclass(frozen=True)
class ArithmeticChain:
    """``start`` then steps ``(op, operand, result)``, op in {+, -, *}; every value stays in [1, 999]."""

    start: int
    steps: tuple[tuple[str, int, int], ...]

    @property
    def answer(self) -> int:
        return self.steps[-1][2]

    @property
    def question(self) -> str:
        words = {"+": "add {}", "-": "subtract {}", "*": "multiply by {}"}
        ops = ", then ".join(words[op].format(operand) for op, operand, _ in self.steps)
        return f"Start with {self.start}, {ops}. What is the result?"

    def step_texts(self) -> list[str]:
        """The worked steps, e.g. ``["7 + 5 = 12.", "12 * 3 = 36."]``."""
        previous = [self.start] + [result for *_, result in self.steps[:-1]]
        return [f"{a} {op} {operand} = {result}." for a, (op, operand, result) in zip(previous, self.steps)]

    @property
    def text(self) -> str:
        return f"Q: {self.question}\nA: {' '.join(self.step_texts())} The answer is {self.answer}."


def make_arithmetic_chain(rng: random.Random, min_steps: int = 2, max_steps: int = 5) -> ArithmeticChain:
    """A random chain on [1, 999]: × only when the product stays ≤ 999, − only when the result stays ≥ 1."""
    value = start = rng.randint(1, 30)
    steps = []
    for _ in range(rng.randint(min_steps, max_steps)):
        ops = (
            (["+"] if value < 999 else [])
            + (["-"] if value > 1 else [])
            + (["*"] if 2 * value <= 999 else [])
        )
        op = rng.choice(ops)
        if op == "+":
            operand = rng.randint(1, min(20, 999 - value))
            value += operand
        elif op == "-":
            operand = rng.randint(1, min(20, value - 1))
            value -= operand
        else:
            operand = rng.randint(2, min(5, 999 // value))
            value *= operand
        steps.append((op, operand, value))
    return ArithmeticChain(start, tuple(steps))


_CONCEPTS = (
    "wumpus", "yumpus", "zumpus", "dumpus", "rompus", "numpus", "tumpus", "vumpus", "impus", "jompus",
    "gorpus", "shumpus", "lempus", "sterpus", "grimpus", "lorpus", "brimpus",
)  # fmt: skip
_ADJECTIVES = (
    "bitter", "sweet", "red", "blue", "large", "small", "happy", "shy", "hot", "cold", "bright", "dull",
    "metallic", "wooden", "transparent", "opaque", "fruity", "spicy", "kind", "feisty",
)  # fmt: skip
_NAMES = ("Max", "Alex", "Sam", "Polly", "Rex", "Fae", "Wren", "Stella", "Sally", "Tom")


@dataclass(frozen=True)
class LogicProblem:
    """A ProntoQA-style problem: shuffled ``facts`` (with distractors), a true/false ``query``, the gold
    proof ``steps`` (one sentence each, modus ponens along an is-a chain) and the ``answer``."""

    facts: tuple[str, ...]
    query: str
    steps: tuple[str, ...]
    answer: bool

    @property
    def text(self) -> str:
        return f"Q: {' '.join(self.facts)} {self.query}\nA: {' '.join(self.steps)} {self.answer}"


def _is(adjective: str, negated: bool) -> str:
    return f"not {adjective}" if negated else adjective


def _a(concept: str) -> str:
    return f"an {concept}" if concept[0] in "aeiou" else f"a {concept}"


def make_logic_problem(rng: random.Random, min_hops: int = 2, max_hops: int = 5) -> LogicProblem:
    """An is-a chain c0 ⊂ … ⊂ c_hops whose top concept has a (possibly negated) property; the entity is a
    c0. Distractors: another property on a chain concept, and an unrelated concept d ⊂ d' with the opposite
    property. d stays outside the chain (linking it in would make it inherit both the property and its
    negation), so every fact set is consistent."""
    hops = rng.randint(min_hops, max_hops)
    concepts = rng.sample(_CONCEPTS, hops + 3)
    chain, (distractor, distractor_parent) = concepts[: hops + 1], concepts[hops + 1 :]
    target, other = rng.sample(_ADJECTIVES, 2)
    negated, query_negated = rng.random() < 0.5, rng.random() < 0.5
    name = rng.choice(_NAMES)
    is_a = [f"Every {a} is {_a(b)}." for a, b in itertools.pairwise(chain)]
    property_fact = f"Every {chain[-1]} is {_is(target, negated)}."
    distractors = [
        f"Every {distractor} is {_is(target, not negated)}.",
        f"Every {distractor} is {_a(distractor_parent)}.",
        f"Every {rng.choice(chain[:-1])} is {_is(other, rng.random() < 0.5)}.",
    ]
    facts = [*is_a, property_fact, *distractors]
    rng.shuffle(facts)
    steps = [f"{name} is {_a(chain[0])}."]
    for fact, concept in zip(is_a, chain[1:]):
        steps += [fact, f"{name} is {_a(concept)}."]
    steps += [property_fact, f"{name} is {_is(target, negated)}."]
    query = f"True or false: {name} is {_is(target, query_negated)}."
    return LogicProblem((*facts, steps[0]), query, tuple(steps), negated == query_negated)


def procedural_documents(kind: str, n: int, seed: int) -> list[str]:
    """``n`` documents of ``kind`` (``entities``, ``arithmetic``, ``prontoqa`` or ``mixed``), seeded."""
    rng = random.Random(seed)
    if kind == "entities":
        return [entity.text for entity in make_entities(n, seed)]
    if kind == "arithmetic":
        return [make_arithmetic_chain(rng).text for _ in range(n)]
    if kind == "prontoqa":
        return [make_logic_problem(rng).text for _ in range(n)]
    if kind == "mixed":
        parts = [
            procedural_documents(k, n // 3 + (i < n % 3), seed + i)
            for i, k in enumerate(PROCEDURAL_KINDS[:3])
        ]
        documents = list(itertools.chain.from_iterable(parts))
        rng.shuffle(documents)
        return documents
    raise ValueError(f"unknown procedural corpus {kind!r}; choose one of {', '.join(PROCEDURAL_KINDS)}")


def cached_documents(kind: str, n: int, seed: int, cache_dir: str | os.PathLike | None = None) -> list[str]:
    """``procedural_documents``, generated once into ``<cache>/text/<kind>-n<n>-s<seed>-v<format>.jsonl``."""
    root = Path(cache_dir).expanduser() if cache_dir is not None else default_cache_dir()
    path = root / "text" / f"{kind}-n{n}-s{seed}-v{PROCEDURAL_FORMAT}.jsonl"
    if not path.is_file():
        documents = procedural_documents(kind, n, seed)

        def write(tmp: str) -> None:
            with open(tmp, "w", encoding="utf-8") as handle:
                handle.writelines(json.dumps({"text": d}) + "\n" for d in documents)

        write_atomic(path, write)
    with path.open(encoding="utf-8") as handle:
        return [json.loads(line)["text"] for line in handle]


# ---------------------------------------------------------------------------------------------- datasets
def block_batch(blocks: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """A training batch from gathered blocks: ``labels`` is its own copy of ``input_ids`` (never an alias,
    so a method may write -100 into the labels in place)."""
    return {**blocks, "labels": blocks["input_ids"].clone()}


class BlockDataset(Dataset):
    """Packed blocks (a dict of ``(n, T)`` tensors, see ``TokenStream.pack``); a batch is gathered with one
    index op."""

    def __init__(self, blocks: dict[str, torch.Tensor]) -> None:
        self.blocks = blocks

    def __len__(self) -> int:
        return len(self.blocks["input_ids"])

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        return self.__getitems__([index])

    def __getitems__(self, indices: Sequence[int]) -> dict[str, torch.Tensor]:
        index = torch.as_tensor(indices, dtype=torch.long)
        return block_batch({key: value[index] for key, value in self.blocks.items()})


def mixture_rows(sizes: Sequence[int], weights: Sequence[float], seed: int) -> torch.Tensor:
    """Rows into the concatenation of sources of ``sizes`` blocks for one epoch of ``sum(sizes)`` rows in
    which source i holds its share ``w_i / Σw`` (rounded by largest remainders): a seeded permutation of its
    blocks, cycled when the share exceeds its size (upsampling) and cut when below (downsampling)."""
    total = sum(sizes)
    shares = torch.tensor(weights, dtype=torch.float64) / sum(weights) * total
    counts = shares.floor().long()
    counts[torch.argsort(shares - counts, descending=True)[: total - int(counts.sum())]] += 1
    generator = torch.Generator().manual_seed(seed)
    rows, start = [], 0
    for size, count in zip(sizes, counts.tolist()):
        if count and not size:
            raise LitlabError("a corpus with a positive weight holds no training block; enlarge it")
        if count:
            order = torch.cat([torch.randperm(size, generator=generator) for _ in range(-(-count // size))])
            rows.append(order[:count] + start)
        start += size
    return torch.cat(rows)


class MixtureShuffle(Sampler[int]):
    """The training order of a weighted mixture: each epoch a fresh ``mixture_rows`` draw, shuffled, both
    seeded by ``(seed, epoch)`` only (Lightning calls ``set_epoch``), so a downsampled source shows other
    blocks in the next epoch and a resumed run draws the batches of an uninterrupted one."""

    def __init__(self, sizes: Sequence[int], weights: Sequence[float], seed: int) -> None:
        self.sizes, self.weights, self.seed, self.epoch = list(sizes), list(weights), seed, 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __iter__(self) -> Iterator[int]:
        seed = self.seed * 1_000_003 + self.epoch
        rows = mixture_rows(self.sizes, self.weights, seed)
        order = torch.randperm(len(rows), generator=torch.Generator().manual_seed(seed + 1))
        return iter(rows[order].tolist())

    def __len__(self) -> int:
        return sum(self.sizes)


class StreamingBlocks(IterableDataset):
    """Blocks of ``block_size`` tokens read from ``path[start:end]`` without loading the file into memory.

    The range is cut into ~``chunk_bytes`` chunks at split points (exact for byte-level BPEs, see
    ``splits_exactly``; other tokenizers may differ at chunk starts); each (process, worker) consumer
    takes every k-th chunk, encodes it and packs the tokens (leftovers carry to its next chunk). With
    ``shuffle``, chunk order and blocks within a chunk are shuffled anew each pass; ``infinite`` repeats
    passes for step-based training, and ``batch_size`` yields whole batches (dicts of ``(B, T)``).
    """

    def __init__(
        self,
        path: str | os.PathLike,
        start: int,
        end: int,
        tokenizer: PreTrainedTokenizerBase,
        block_size: int,
        batch_size: int,
        chunk_bytes: int = 1 << 20,
        shuffle: bool = False,
        infinite: bool = False,
        seed: int = 0,
        rank: int = 0,
        world_size: int = 1,
    ) -> None:
        self.path, self.start, self.end = str(path), start, end
        self.tokenizer, self.block_size, self.batch_size = tokenizer, block_size, batch_size
        self.chunk_bytes, self.shuffle, self.infinite, self.seed = chunk_bytes, shuffle, infinite, seed
        self.rank, self.world_size = rank, world_size

    def _consumer(self) -> tuple[int, int]:
        info = get_worker_info()
        workers, worker = (1, 0) if info is None else (info.num_workers, info.id)
        return self.rank * workers + worker, self.world_size * workers

    def __iter__(self) -> Iterator[dict[str, torch.Tensor]]:
        consumer, n_consumers = self._consumer()
        with open(self.path, "rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data:
            offsets = chunk_offsets(data, self.start, self.end, self.chunk_bytes)
            chunks = list(itertools.pairwise(offsets))
            pending: list[dict[str, torch.Tensor]] = []
            for epoch in itertools.count():
                rng = random.Random(self.seed + 7919 * epoch + consumer)
                order = list(range(consumer, len(chunks), n_consumers))
                if self.shuffle:
                    rng.shuffle(order)
                carry = encode_texts(self.tokenizer, [])
                for index in order:
                    tokens = TokenStream.cat([carry, encode_bytes(self.tokenizer, data, *chunks[index])])
                    blocks = tokens.pack(self.block_size)
                    n_blocks = len(blocks["input_ids"])
                    carry = tokens[n_blocks * self.block_size :]
                    if self.shuffle:
                        generator = torch.Generator().manual_seed(rng.getrandbits(62))
                        permutation = torch.randperm(n_blocks, generator=generator)
                        blocks = {key: value[permutation] for key, value in blocks.items()}
                    pending.extend({key: value[i] for key, value in blocks.items()} for i in range(n_blocks))
                    while len(pending) >= self.batch_size:
                        yield block_batch(_stack(pending[: self.batch_size]))
                        del pending[: self.batch_size]
                if not self.infinite:
                    break
            if pending:  # the last, partial batch of a finite pass
                yield block_batch(_stack(pending))


def _stack(rows: Sequence[dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
    return {key: torch.stack([row[key] for row in rows]) for key in rows[0]}


# --------------------------------------------------------------------------------------------- sources
@dataclass
class Source:
    """One corpus of a data module, cut into train/val/test: documents (procedural, JSONL) or a text file's
    byte ranges. ``records[split][i]`` describes document i of a split (its text and JSONL fields, or the
    file's byte range)."""

    name: str
    records: list[list[dict[str, Any]]]
    path: Path | None = None
    offsets: list[int] | None = None

    def texts(self, split: int) -> list[str]:
        return [record["text"] for record in self.records[split]]


def split_documents(records: list[dict[str, Any]], fractions: Sequence[float], name: str) -> list[list]:
    """Train/val/test by index: the last ``fractions[1:]`` shares (rounded down, at least one each)."""
    sizes = [math.floor(f * len(records)) for f in fractions[1:]]
    if min(sizes) == 0:
        raise LitlabError(f"{name}: {len(records)} documents are too few for non-empty val and test splits")
    n_train = len(records) - sum(sizes)
    return [records[:n_train], records[n_train : n_train + sizes[0]], records[n_train + sizes[0] :]]


# -------------------------------------------------------------------------------------------- datamodule
class TextDataModule(GlobalBatchDataModule):
    """Packed language-modelling blocks from text files, procedural corpora, JSONL documents or a weighted
    mixture of them, with their tokenizer.

    Args:
        corpus: ``tinyshakespeare``, a procedural kind (``entities``, ``arithmetic``, ``prontoqa``,
            ``mixed``), the path of a ``.jsonl`` file of documents or of a UTF-8 text file; or a list of
            these, mixed by ``weights``.
        weights: for a list of corpora, each one's share of the training blocks of an epoch (normalised;
            an epoch has as many blocks as all sources together, drawn anew each epoch, see
            ``MixtureShuffle``). Val and test take every source whole.
        text_field: the field holding a document's text in JSONL records.
        root: folder holding named and relative files (default: ``$LITLAB_DATA_ROOT/text``, then the
            shipped copy).
        n_documents: documents generated for a procedural corpus.
        vocab_size: size of the byte-level BPE trained (and cached) on the train split.
        tokenizer_path: use this saved tokenizer instead (a checkpoint folder; set it when fine-tuning).
        block_size: tokens per training sequence.
        batch_size: the global batch; ``eval_batch_size`` defaults to it.
        val_fraction, test_fraction: shares of each corpus (bytes of a file, documents otherwise).
        tokenizer_train_bytes: at most this many bytes of a file's train split train the tokenizer.
        streaming: read a single text file chunk by chunk (for files too large for memory); training
            then cycles forever, so set ``trainer.max_steps``.
        chunk_bytes: chunk size of streaming reads.
        cache_dir: tokenizer and procedural-corpus cache (default ``$LITLAB_CACHE`` or ~/.cache/litlab).
        corpus_seed: seeds the procedural generators (kept apart from ``seed`` so that runs with different
            seeds train on the same corpus).
        seed: seeds the shuffling of training blocks and the choice of repeated blocks in a mixture.
    """

    def __init__(
        self,
        corpus: str | Sequence[str] = "tinyshakespeare",
        weights: Sequence[float] | None = None,
        text_field: str = "text",
        root: str | None = None,
        n_documents: int = 6000,
        vocab_size: int = 1024,
        tokenizer_path: str | None = None,
        block_size: int = 128,
        batch_size: int = 32,
        eval_batch_size: int | None = None,
        val_fraction: float = 0.05,
        test_fraction: float = 0.05,
        tokenizer_train_bytes: int = 50_000_000,
        streaming: bool = False,
        chunk_bytes: int = 1 << 20,
        cache_dir: str | None = None,
        corpus_seed: int = 0,
        seed: int = 0,
        num_workers: int = 0,
    ) -> None:
        super().__init__(batch_size, num_workers)
        if not (val_fraction > 0 and test_fraction > 0 and val_fraction + test_fraction < 1):
            raise ConfigError(
                f"val_fraction={val_fraction}, test_fraction={test_fraction} leave no train split"
            )
        corpora = [corpus] if isinstance(corpus, str) else list(corpus)
        if not corpora:
            raise ConfigError("data.corpus is an empty list; name at least one corpus")
        if weights is None and len(corpora) > 1:
            raise ConfigError(f"data.corpus lists {len(corpora)} corpora; give data.weights, one per corpus")
        if weights is not None and (len(weights) != len(corpora) or min(weights) < 0 or not sum(weights) > 0):
            raise ConfigError(
                f"data.weights={list(weights)} must hold one non-negative weight per corpus "
                f"({len(corpora)}) with a positive sum"
            )
        if streaming and (len(corpora) > 1 or _is_documents(corpora[0])):
            raise ConfigError("streaming=true reads one text file; documents and mixtures are held in memory")
        self.save_hyperparameters(logger=False)
        self.corpora, self.weights, self.text_field = corpora, weights, text_field
        self.root, self.n_documents = root, n_documents
        self.vocab_size, self.tokenizer_path, self.block_size = vocab_size, tokenizer_path, block_size
        self.eval_batch_size = eval_batch_size or batch_size
        self.fractions = (1 - val_fraction - test_fraction, val_fraction, test_fraction)
        self.tokenizer_train_bytes, self.streaming = tokenizer_train_bytes, streaming
        self.chunk_bytes, self.cache_dir = chunk_bytes, cache_dir
        self.corpus_seed, self.seed = corpus_seed, seed
        self.tokenizer: PreTrainedTokenizerBase | None = None
        self.sources: list[Source] = []
        self.documents: dict[str, list[dict[str, Any]]] = {}
        self.datasets: list[BlockDataset] = []
        self.train_sizes: list[int] = []  # training blocks per source (a mixture's shares are of these)

    # -- corpus
    def _source(self, name: str) -> Source:
        if name in PROCEDURAL_KINDS:
            texts = cached_documents(name, self.n_documents, self.corpus_seed, self.cache_dir)
            records = [{"source": name, "text": text} for text in texts]
            return Source(name, split_documents(records, self.fractions, name))
        path = text_file(name, self.root)
        if path.suffix == ".jsonl":
            records = [{"source": name, **r} for r in read_jsonl(path, self.text_field)]
            for record in records:
                record["text"] = record.pop(self.text_field)
            return Source(name, split_documents(records, self.fractions, name))
        if path.stat().st_size == 0:
            raise LitlabError(f"{path} is empty; give a UTF-8 text file with content")
        with open(path, "rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data:
            offsets = split_offsets(data, self.fractions)
        records = [[{"source": name, "start": a, "end": b}] for a, b in itertools.pairwise(offsets)]
        return Source(name, records, path, offsets)

    def _tokenizer_texts(self, source: Source) -> list[str]:
        if source.path is None:
            return source.texts(0)
        with (
            open(source.path, "rb") as handle,
            mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data,
        ):
            train_end = source.offsets[1]
            end = find_boundary(data, min(train_end, self.tokenizer_train_bytes), train_end)
            offsets = chunk_offsets(data, 0, end, self.chunk_bytes)
            return [bytes(data[a:b]).decode("utf-8") for a, b in itertools.pairwise(offsets)]

    def _prepare(self) -> PreTrainedTokenizerBase:
        """Open every source (generating procedural corpora) and load or train the tokenizer (cached)."""
        if self.tokenizer is None:
            self.sources = [self._source(name) for name in self.corpora]
            if self.tokenizer_path:
                self.tokenizer = load_tokenizer(self.tokenizer_path)
            else:
                texts = [text for source in self.sources for text in self._tokenizer_texts(source)]
                self.tokenizer = cached_bpe(texts, self.vocab_size, self.cache_dir)
        return self.tokenizer

    def prepare_data(self) -> None:
        """Generate the procedural corpora and train the tokenizer once (both cached) on the main process."""
        self._prepare()

    def data_spec(self) -> dict[str, Any]:
        """What the model is built from: the ``tokenizer`` (vocabulary, special ids, bytes per token) and
        the ``block_size`` it must attend over."""
        return {"tokenizer": self._prepare(), "block_size": self.block_size}

    def _encode(self, source: Source, split: int, first_doc: int) -> TokenStream:
        if source.path is None:
            return encode_texts(self.tokenizer, source.texts(split), self.tokenizer.eos_token_id, first_doc)
        with (
            open(source.path, "rb") as handle,
            mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data,
        ):
            return encode_bytes(self.tokenizer, data, *source.offsets[split : split + 2], doc_id=first_doc)

    def setup(self, stage: str | None = None) -> None:
        if self.datasets or (self.streaming and self.documents):
            return
        self._prepare()
        self.documents = {
            name: [r for s in self.sources for r in s.records[i]] for i, name in enumerate(SPLITS)
        }
        if self.streaming:
            return
        for split in range(3):
            first_docs = itertools.accumulate((len(s.records[split]) for s in self.sources), initial=0)
            packed = [
                self._encode(s, split, d).pack(self.block_size) for s, d in zip(self.sources, first_docs)
            ]
            blocks = {key: torch.cat([p[key] for p in packed]) for key in packed[0]}
            if split == 0:
                self.train_sizes = [len(p["input_ids"]) for p in packed]
            self.datasets.append(BlockDataset(blocks))
        if min(len(d) for d in self.datasets) == 0:
            raise LitlabError(
                f"a split of {', '.join(self.corpora)} holds fewer than block_size={self.block_size} tokens; "
                "use a larger corpus (n_documents) or a smaller block_size"
            )

    # -- loaders
    def _streaming(self, split: int, batch_size: int, train: bool) -> DataLoader:
        trainer = self.trainer
        source = self.sources[0]
        dataset = StreamingBlocks(
            source.path, source.offsets[split], source.offsets[split + 1], self.tokenizer, self.block_size,
            batch_size, self.chunk_bytes, shuffle=train, infinite=train, seed=self.seed,
            rank=trainer.global_rank if trainer else 0, world_size=self.world_size,
        )  # fmt: skip
        return DataLoader(dataset, batch_size=None, num_workers=self.num_workers)

    def _eval_batch(self) -> int:
        return max(1, -(-self.eval_batch_size // self.world_size))

    def train_dataloader(self) -> DataLoader:
        if self.streaming:
            return self._streaming(0, self.per_device_batch_size, train=True)
        batch = self.per_device_batch_size
        if self.weights is None:
            return batch_loader(self.datasets[0], batch, True, self.seed, self.num_workers)
        sampler = MixtureShuffle(self.train_sizes, self.weights, self.seed)
        return DataLoader(
            self.datasets[0], batch_size=batch, sampler=sampler, collate_fn=batch_collate,
            num_workers=self.num_workers, persistent_workers=self.num_workers > 0,
        )  # fmt: skip

    def val_dataloader(self) -> DataLoader:
        if self.streaming:
            return self._streaming(1, self._eval_batch(), train=False)
        return batch_loader(self.datasets[1], self._eval_batch(), False, self.seed, self.num_workers)

    def test_dataloader(self) -> DataLoader:
        if self.streaming:
            return self._streaming(2, self._eval_batch(), train=False)
        return batch_loader(self.datasets[2], self._eval_batch(), False, self.seed, self.num_workers)


def _is_documents(name: str) -> bool:
    return name in PROCEDURAL_KINDS or name.endswith(".jsonl")
