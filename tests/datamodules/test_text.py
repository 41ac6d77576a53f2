"""Text data: file resolution, exact chunked encoding, packing with byte counts and document ids, the
procedural generators checked by independent solvers (answers and fact-set consistency), caching, JSONL
corpora and mixtures, the DataModule's splits and batches, and streaming = in-memory blocks."""

from __future__ import annotations

import itertools
import json
import random
import re
from collections.abc import Sequence
from pathlib import Path

import pytest
import torch
from tokenizers import Tokenizer, models, pre_tokenizers, trainers

import litlab.core.paths as data_root
import litlab.datamodules.text as text
from litlab.core.errors import ConfigError, LitlabError
from litlab.datamodules.text import (
    TextDataModule,
    cached_documents,
    chunk_offsets,
    encode_bytes,
    encode_prompt_completion,
    encode_texts,
    make_arithmetic_chain,
    make_entities,
    make_logic_problem,
    mixture_rows,
    pack_blocks,
    procedural_documents,
    read_jsonl,
    split_offsets,
    splits_exactly,
    text_file,
)
from litlab.datamodules.tokenizers import (
    cached_bpe,
    corpus_hash,
    token_byte_lengths,
    tokenizer_cache_path,
    wrap_tokenizer,
)
from tests.lm.local_tokenizers import sentencepiece_bpe

SHAKESPEARE = text_file("tinyshakespeare")


@pytest.fixture(scope="module")
def small_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The first ~200 kB of tinyshakespeare as a corpus file (a path corpus, and quick to tokenize)."""
    data = SHAKESPEARE.read_bytes()
    path = tmp_path_factory.mktemp("text") / "small.txt"
    path.write_bytes(data[: data.index(b"\n\n", 200_000) + 1])
    return path


@pytest.fixture(scope="module")
def small_tokenizer(tmp_path_factory: pytest.TempPathFactory) -> object:
    corpus = SHAKESPEARE.read_text(encoding="utf-8")[:100_000]
    return cached_bpe([corpus], 400, tmp_path_factory.mktemp("cache"))


def test_text_file_resolution_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "explicit").mkdir()
    (tmp_path / "explicit" / "tinyshakespeare.txt").write_text("explicit")
    (tmp_path / "env" / "text").mkdir(parents=True)
    (tmp_path / "env" / "text" / "tinyshakespeare.txt").write_text("env")
    monkeypatch.setenv("LITLAB_DATA_ROOT", str(tmp_path / "env"))
    assert text_file("tinyshakespeare", tmp_path / "explicit").read_text() == "explicit"
    assert text_file("tinyshakespeare").read_text() == "env"
    monkeypatch.setenv("LITLAB_DATA_ROOT", str(tmp_path / "nowhere"))
    assert text_file("tinyshakespeare") == data_root.shipped_data_dir("text") / "tinyshakespeare.txt"
    with pytest.raises(FileNotFoundError, match="data.root=.*LITLAB_DATA_ROOT.*char-rnn"):
        text_file("tinyshakespeare", tmp_path / "empty")
    assert text_file(str(tmp_path / "env" / "text" / "tinyshakespeare.txt")).read_text() == "env"


def test_chunked_encoding_is_exactly_the_whole_encoding(small_tokenizer: object, tmp_path: Path) -> None:
    data = SHAKESPEARE.read_bytes()[:300_000]
    whole = small_tokenizer.backend_tokenizer.encode(data.decode(), add_special_tokens=False).ids
    assert encode_bytes(small_tokenizer, data, 0, len(data), chunk_bytes=997).ids.tolist() == whole
    # whitespace-heavy text, with a tokenizer that learned merges such as " \n" and "\n\n"
    rng = random.Random(0)
    pieces = ["word", " ", "  ", "\n", "\n\n", " \n", "\t", "é", "😀", ",", "'s", "x\ny", "1", "\r\n"]
    noisy = "".join(rng.choice(pieces) for _ in range(20_000))
    tokenizer = cached_bpe([noisy], 400, tmp_path)
    whole = tokenizer.backend_tokenizer.encode(noisy, add_special_tokens=False).ids
    stream = encode_bytes(tokenizer, noisy.encode(), 0, len(noisy.encode()), chunk_bytes=50)
    assert stream.ids.tolist() == whole and int(stream.byte_counts.sum()) == len(noisy.encode())


def test_tokenizers_that_cannot_be_chunked_are_encoded_whole() -> None:
    metaspace = Tokenizer(models.BPE(unk_token="<unk>"))
    metaspace.pre_tokenizer = pre_tokenizers.Metaspace()  # prepends "▁" to every encoded string
    corpus = SHAKESPEARE.read_text(encoding="utf-8")[:20_000]
    metaspace.train_from_iterator([corpus], trainers.BpeTrainer(vocab_size=200, special_tokens=["<unk>"]))
    tokenizer = wrap_tokenizer(metaspace)
    assert not splits_exactly(tokenizer)
    whole = tokenizer.backend_tokenizer.encode(corpus, add_special_tokens=False).ids
    stream = encode_bytes(tokenizer, corpus.encode(), 0, len(corpus.encode()), chunk_bytes=500)
    assert stream.ids.tolist() == whole and int(stream.byte_counts.sum()) == len(corpus.encode())


def test_offsets_cut_at_line_breaks_and_cover_the_data() -> None:
    data = SHAKESPEARE.read_bytes()
    offsets = split_offsets(data, (0.9, 0.05, 0.05))
    assert offsets[0] == 0 and offsets[-1] == len(data) and offsets == sorted(offsets)
    assert all(data[o - 1 : o] == b"\n" for o in offsets[1:-1])
    assert abs(offsets[1] / len(data) - 0.9) < 0.001
    chunks = chunk_offsets(data, offsets[1], offsets[2], 4096)
    assert chunks[0] == offsets[1] and chunks[-1] == offsets[2]
    assert all(0 < b - a < 3 * 4096 for a, b in itertools.pairwise(chunks))
    line = b"x" * 5000  # no line break at all: cut at a UTF-8 character start
    cut = chunk_offsets("é".encode() * 3000 + line, 0, 11000, 1001)
    assert all((("é".encode() * 3000 + line)[c] & 0xC0) != 0x80 for c in cut[1:-1])


def test_pack_blocks() -> None:
    blocks = pack_blocks(torch.arange(10), 4)
    assert blocks.tolist() == [[0, 1, 2, 3], [4, 5, 6, 7]]


def test_generators_are_seeded() -> None:
    for kind in ("entities", "arithmetic", "prontoqa", "mixed"):
        first = procedural_documents(kind, 30, seed=3)
        assert first == procedural_documents(kind, 30, seed=3) and len(first) == 30
        assert first != procedural_documents(kind, 30, seed=4)
    with pytest.raises(ValueError, match="unknown procedural corpus"):
        procedural_documents("poems", 3, 0)


def test_arithmetic_chains_compute_correctly() -> None:
    rng = random.Random(0)
    for _ in range(300):
        chain = make_arithmetic_chain(rng)
        value = chain.start
        for step in chain.step_texts():
            a, op, b, result = re.fullmatch(r"(\d+) ([-+*]) (\d+) = (\d+)\.", step).groups()
            assert int(a) == value
            value = {"+": int(a) + int(b), "-": int(a) - int(b), "*": int(a) * int(b)}[op]
            assert value == int(result) and 1 <= value <= 999
        assert chain.text.endswith(f"The answer is {value}.")


def _solve(facts: list[str], query: str) -> bool:
    """An independent forward-chaining solver for the ProntoQA-style sentences."""
    is_a, properties, member = {}, {}, None
    for fact in facts:
        if m := re.fullmatch(r"Every (\w+) is an? (\w+)\.", fact):
            is_a[m[1]] = m[2]
        elif m := re.fullmatch(r"Every (\w+) is (not )?(\w+)\.", fact):
            properties.setdefault(m[1], {})[m[3]] = m[2] is None
        elif m := re.fullmatch(r"(\w+) is an? (\w+)\.", fact):
            member = m[2]
    name, negated, adjective = re.fullmatch(r"True or false: (\w+) is (not )?(\w+)\.", query).groups()
    holds, concept = None, member
    while concept is not None:
        if adjective in properties.get(concept, {}):
            assert holds is None, "the chain must not state the property twice"
            holds = properties[concept][adjective]
        concept = is_a.get(concept)
    assert holds is not None, "the property must follow from the facts"
    return holds != (negated is not None)


def test_logic_problems_answers_follow_from_their_facts() -> None:
    rng = random.Random(0)
    answers = []
    for _ in range(300):
        problem = make_logic_problem(rng)
        assert _solve(list(problem.facts), problem.query) == problem.answer
        assert 5 <= len(problem.steps) <= 13 and problem.text.endswith(str(problem.answer))
        answers.append(problem.answer)
    assert 0.4 < sum(answers) / len(answers) < 0.6


def _closure_conflicts(facts: Sequence[str]) -> list[str]:
    """Every concept (and the entity) whose inherited properties include some P and not-P: forward
    chaining over all is-a facts, with any number of parents."""
    parents: dict[str, set[str]] = {}
    properties: dict[str, set[tuple[str, bool]]] = {}
    for fact in facts:
        if m := re.fullmatch(r"(?:Every )?(\w+) is an? (\w+)\.", fact):
            parents.setdefault(m[1], set()).add(m[2])
        elif m := re.fullmatch(r"(?:Every )?(\w+) is (not )?(\w+)\.", fact):
            properties.setdefault(m[1], set()).add((m[3], m[2] is None))
        else:
            raise AssertionError(f"unparsed fact {fact!r}")
    conflicts = []
    for start in set(parents) | set(properties):
        seen, stack, held = set(), [start], set()
        while stack:
            if (concept := stack.pop()) not in seen:
                seen.add(concept)
                held |= properties.get(concept, set())
                stack += parents.get(concept, ())
        if any((adjective, not value) in held for adjective, value in held):
            conflicts.append(start)
    return conflicts


def test_every_logic_problem_has_a_consistent_fact_set() -> None:
    """The issue's defect: a distractor linked the unrelated concept into the chain (1000 of 1000 problems
    then derived a property and its negation for it)."""
    rng = random.Random(1)
    for _ in range(1000):
        problem = make_logic_problem(rng)
        assert _closure_conflicts([*problem.facts, *problem.steps]) == [], problem.text


def test_a_world_larger_than_the_name_space_is_a_config_error_not_a_hang() -> None:
    # the two-syllable river names run out first (28² of them, which the cities also draw from)
    assert len(make_entities(10_000, seed=0)) == 10_000
    with pytest.raises(ConfigError, match="ran out of unique names .* ask for fewer documents"):
        make_entities(12_000, seed=0)


def test_entities_state_their_attributes_in_one_consistent_world() -> None:
    entities = make_entities(60, seed=0)
    names = {kind: {e.name for e in entities if e.kind == kind} for kind in ("person", "city", "company")}
    assert [len(v) for v in names.values()] == [20, 20, 20]
    references = {"employer": "company", "mayor": "person", "founder": "person", "birthplace": "city",
                  "headquarters": "city"}  # fmt: skip
    for entity in entities:
        assert 5 <= len(entity.attributes) <= 8
        for (question, answer), (key, value) in zip(entity.questions(), entity.attributes):
            assert entity.name in question and answer == value and value in entity.text
            if key in references:
                assert value in names[references[key]]


def test_procedural_documents_are_cached(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first = cached_documents("prontoqa", 20, 1, tmp_path)
    monkeypatch.setattr(text, "procedural_documents", lambda *a: pytest.fail("regenerated a cached corpus"))
    assert cached_documents("prontoqa", 20, 1, tmp_path) == first
    assert len(list((tmp_path / "text").glob("prontoqa-n20-s1-*.jsonl"))) == 1


def test_datamodule_splits_trains_its_tokenizer_on_train_only_and_batches(
    tmp_path: Path, small_file: Path
) -> None:
    options = {"vocab_size": 400, "block_size": 64, "batch_size": 8, "eval_batch_size": 16}
    data = TextDataModule(corpus=str(small_file), cache_dir=str(tmp_path), **options)
    assert data.data_spec()["block_size"] == 64 and len(data.data_spec()["tokenizer"]) == 400
    data.setup()
    raw = small_file.read_bytes()
    offsets = split_offsets(raw, (0.9, 0.05, 0.05))
    train_texts = [
        raw[a:b].decode() for a, b in itertools.pairwise(chunk_offsets(raw, 0, offsets[1], 1 << 20))
    ]
    assert tokenizer_cache_path(train_texts, 400, tmp_path).is_file()
    assert corpus_hash(train_texts) != corpus_hash([raw.decode()])
    sizes = [len(d) for d in data.datasets]
    table = token_byte_lengths(data.tokenizer)
    tokens = [int(table[d.blocks["input_ids"]].sum()) for d in data.datasets]
    assert all(abs(t / (b - a) - 1) < 0.01 for t, (a, b) in zip(tokens, itertools.pairwise(offsets)))
    assert all(torch.equal(table[d.blocks["input_ids"]], d.blocks["byte_counts"]) for d in data.datasets)
    assert sizes[1] > 0 and sizes[2] > 0 and 16 < sizes[0] / sizes[1] < 20
    assert [r["start"] for r in data.documents["val"]] == [offsets[1]]
    assert next(iter(data.val_dataloader()))["input_ids"].shape == (16, 64)


def test_labels_never_alias_the_inputs(tmp_path: Path, small_file: Path) -> None:
    """The issue's defect: labels and input_ids were one tensor, so labels[...] = -100 erased inputs."""
    options = {"corpus": str(small_file), "vocab_size": 400, "block_size": 64, "batch_size": 8}
    for streaming in (False, True):
        data = TextDataModule(cache_dir=str(tmp_path), streaming=streaming, chunk_bytes=20_000, **options)
        data.setup()
        for loader in (data.train_dataloader(), data.val_dataloader()):
            batch = next(iter(loader))
            assert torch.equal(batch["input_ids"], batch["labels"])
            before = batch["input_ids"].clone()
            batch["labels"][:, :10] = -100
            assert torch.equal(batch["input_ids"], before)


def test_procedural_datamodule_separates_documents_with_eos_and_keeps_their_ids(tmp_path: Path) -> None:
    data = TextDataModule(corpus="arithmetic", n_documents=200, vocab_size=300, block_size=32, batch_size=4,
                          cache_dir=str(tmp_path))  # fmt: skip
    data.setup()
    eos = data.tokenizer.eos_token_id
    assert [len(d) for d in data.datasets][0] > 0
    val = data.datasets[1].blocks
    assert int((val["input_ids"] == eos).sum()) >= 8  # 10 val documents, a partial block dropped
    # every token's document id points at the document whose text it encodes
    documents = data.documents["val"]
    for block, ids in zip(val["input_ids"], val["doc_ids"]):
        for doc in ids.unique().tolist():
            tokens = block[ids == doc]
            text_of_doc = data.tokenizer.decode(tokens[tokens != eos])
            assert text_of_doc in documents[doc]["text"]
    assert len(documents) == 10 and all(d["source"] == "arithmetic" for d in documents)
    with pytest.raises(LitlabError, match="too few"):
        TextDataModule(corpus="arithmetic", n_documents=10, cache_dir=str(tmp_path)).setup()


def test_byte_counts_of_batches_are_exact_for_a_sentencepiece_tokenizer(
    tmp_path: Path, small_file: Path, shakespeare: str
) -> None:
    sentencepiece_bpe(shakespeare[:60_000]).save_pretrained(tmp_path / "sp")
    data = TextDataModule(corpus=str(small_file), tokenizer_path=str(tmp_path / "sp"), block_size=64,
                          batch_size=8, cache_dir=str(tmp_path))  # fmt: skip
    data.setup()
    raw = small_file.read_bytes()
    offsets = split_offsets(raw, (0.9, 0.05, 0.05))
    whole = encode_texts(data.tokenizer, [raw[offsets[1] : offsets[2]].decode()])
    assert int(whole.byte_counts.sum()) == offsets[2] - offsets[1]
    val = data.datasets[1].blocks
    assert torch.equal(val["byte_counts"].flatten(), whole.byte_counts[: val["byte_counts"].numel()])


def _write_jsonl(path: Path, texts: list[str], **fields: list) -> Path:
    with path.open("w") as handle:
        for index, text in enumerate(texts):
            handle.write(json.dumps({"body": text, **{k: v[index] for k, v in fields.items()}}) + "\n")
    return path


def test_jsonl_corpus_keeps_records_and_reports_bad_lines(tmp_path: Path, shakespeare: str) -> None:
    texts = [shakespeare[i * 300 : (i + 1) * 300] for i in range(100)]
    path = _write_jsonl(tmp_path / "docs.jsonl", texts, score=list(range(100)))
    data = TextDataModule(corpus=str(path), text_field="body", vocab_size=300, block_size=32, batch_size=4,
                          cache_dir=str(tmp_path))  # fmt: skip
    data.setup()
    assert [d["text"] for d in data.documents["train"]] == texts[:90]
    assert [d["score"] for d in data.documents["test"]] == list(range(95, 100))
    batch = next(iter(data.train_dataloader()))
    assert set(batch) == {"input_ids", "labels", "byte_counts", "doc_ids"}
    (tmp_path / "bad.jsonl").write_text('{"body": "fine"}\n{"text": 3}\n')
    with pytest.raises(LitlabError, match="bad.jsonl:2: .*'body'"):
        read_jsonl(tmp_path / "bad.jsonl", "body")


def test_mixture_rows_hold_each_source_s_share() -> None:
    rows = mixture_rows([100, 20, 30], [1.0, 1.0, 0.0], seed=0)
    assert len(rows) == 150
    counts = torch.bincount(torch.bucketize(rows, torch.tensor([100, 120]), right=True), minlength=3)
    assert counts.tolist() == [75, 75, 0]
    small = rows[(rows >= 100) & (rows < 120)]
    uses = torch.bincount(small - 100, minlength=20).tolist()
    assert sorted(uses) == [3] * 5 + [4] * 15  # 75 = 3 full cycles + 15: cycled, not resampled
    assert len(rows[rows < 100].unique()) == 75  # a downsampled source repeats nothing
    assert torch.equal(rows, mixture_rows([100, 20, 30], [1.0, 1.0, 0.0], seed=0))


def test_weighted_mixture_of_corpora(tmp_path: Path, shakespeare: str) -> None:
    path = _write_jsonl(tmp_path / "plays.jsonl", [shakespeare[i * 400 : (i + 1) * 400] for i in range(120)])
    options = {"n_documents": 300, "vocab_size": 300, "block_size": 32, "batch_size": 4}
    options["cache_dir"] = str(tmp_path)
    data = TextDataModule(corpus=["arithmetic", str(path)], weights=[3, 1], text_field="body", **options)
    data.setup()
    train = data.datasets[0]
    n_arithmetic = len(data.documents["train"]) - 108  # sources in order: arithmetic, then plays
    sampler = data.train_dataloader().sampler
    epochs = []
    for epoch in (0, 1, 0):
        sampler.set_epoch(epoch)
        epochs.append(torch.tensor(list(sampler)))
    assert torch.equal(epochs[0], epochs[2]) and not torch.equal(epochs[0], epochs[1])  # (seed, epoch) only
    for rows in epochs[:2]:
        assert len(rows) == len(train)
        source = train.blocks["doc_ids"][rows, 0] >= n_arithmetic
        assert abs(float(source.float().mean()) - 0.25) < 0.01
    n_arith, n_plays = data.train_sizes
    assert n_plays > len(train) / 4  # the plays are downsampled: each epoch shows other blocks of them
    shown = [set(rows[rows >= n_arith].tolist()) for rows in epochs[:2]]
    assert shown[0] != shown[1] and len(shown[0]) == len(shown[1]) == round(len(train) / 4)
    batch = next(iter(data.train_dataloader()))
    assert batch["input_ids"].shape == (4, 32)
    assert {d["source"] for d in data.documents["val"]} == {"arithmetic", str(path)}
    with pytest.raises(ConfigError, match="weights"):
        TextDataModule(corpus=["arithmetic", "prontoqa"])
    with pytest.raises(ConfigError, match="streaming"):
        TextDataModule(corpus=["arithmetic", "prontoqa"], weights=[1, 1], streaming=True)


def test_streaming_yields_the_in_memory_blocks(tmp_path: Path, small_file: Path) -> None:
    options = {"corpus": str(small_file), "vocab_size": 400, "block_size": 64, "batch_size": 8}
    options["cache_dir"] = str(tmp_path)
    memory = TextDataModule(**options)
    memory.setup()
    stream = TextDataModule(streaming=True, chunk_bytes=5000, **options)
    stream.setup()
    streamed = list(stream.val_dataloader())
    for key in ("input_ids", "byte_counts", "doc_ids"):
        assert torch.equal(torch.cat([b[key] for b in streamed]), memory.datasets[1].blocks[key])
    offsets = stream.sources[0].offsets
    ranks = [
        text.StreamingBlocks(small_file, *offsets[1:3], stream.tokenizer, 64, 8, 5000, rank=r, world_size=2)
        for r in (0, 1)
    ]
    blocks = [torch.cat([b["input_ids"] for b in ranks[r]]) for r in (0, 1)]
    assert abs(len(blocks[0]) + len(blocks[1]) - len(memory.datasets[1])) <= 2 and not torch.equal(
        blocks[0][:4], blocks[1][:4]
    )
    train = iter(stream.train_dataloader())
    first = [next(train)["input_ids"] for _ in range(3)]
    assert all(b.shape == (8, 64) for b in first)


def test_prompt_completion_encoding(small_tokenizer: object) -> None:
    batch = encode_prompt_completion(small_tokenizer, ["Q: 2 + 2?\nA:"], [" 4"], max_length=16)
    prompt = small_tokenizer.encode("Q: 2 + 2?\nA:")
    completion = small_tokenizer.encode(" 4") + [small_tokenizer.eos_token_id]
    n = len(prompt) + len(completion)
    assert batch["input_ids"][0, :n].tolist() == prompt + completion
    assert batch["labels"][0].tolist() == [-100] * len(prompt) + completion + [-100] * (16 - n)
    assert batch["attention_mask"][0].tolist() == [1] * n + [0] * (16 - n)
    assert int(batch["byte_counts"].sum()) == 2  # " 4"; prompt, EOS and padding count nothing
