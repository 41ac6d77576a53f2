"""Byte-level BPE tokenizers: trained once per corpus (cached by content hash), wrapped for transformers,
and cut down to a "subset" student made of a teacher's first N merges.

Ids are laid out as the ``tokenizers`` BPE trainer assigns them: the special tokens, then the 256 byte
symbols of the GPT-2 byte alphabet, then one token per merge in merge order. A student built from the
first N merges therefore owns exactly the teacher ids ``0 .. len(student) - 1``, with the same strings.
"""

from __future__ import annotations

import hashlib
import json
import os
import weakref
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path

import numpy as np
import torch
from tokenizers import Encoding, Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import AutoTokenizer, PreTrainedTokenizerBase, PreTrainedTokenizerFast

from litlab.core.cache import write_atomic
from litlab.core.errors import LitlabError

EOS_TOKEN = "<|endoftext|>"
PAD_TOKEN = "<|pad|>"
MASK_TOKEN = "<|mask|>"
SPECIAL_TOKENS = (EOS_TOKEN, PAD_TOKEN, MASK_TOKEN)
# Part of every cache key: bump it when the training recipe changes so that stale tokenizers are not reused.
TOKENIZER_FORMAT = 1


def default_cache_dir() -> Path:
    """``$LITLAB_CACHE`` if set, else ``~/.cache/litlab`` (the same rule as ``paths.cache_dir``)."""
    env = os.environ.get("LITLAB_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "litlab"


def train_bpe(
    texts: Sequence[str], vocab_size: int, special_tokens: Sequence[str] = SPECIAL_TOKENS
) -> Tokenizer:
    """A byte-level BPE (GPT-2 pre-tokeniser, no prefix space) trained on ``texts`` up to ``vocab_size`` ids.

    Every string round-trips: the 256 byte symbols are always in the vocabulary, whatever the corpus.
    """
    minimum = len(special_tokens) + 256
    if vocab_size < minimum:
        raise ValueError(f"vocab_size={vocab_size} is below {minimum} (special tokens + 256 byte symbols)")
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(special_tokens),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(texts, trainer=trainer, length=len(texts))
    return tokenizer


def wrap_tokenizer(tokenizer: Tokenizer) -> PreTrainedTokenizerFast:
    """The transformers view of a raw BPE: ``<|endoftext|>`` is BOS and EOS, plus pad and mask tokens.

    No special tokens are added when encoding, so ``encode(text)`` is the BPE of ``text`` alone.
    """
    vocab = tokenizer.get_vocab()
    named = {"bos_token": EOS_TOKEN, "eos_token": EOS_TOKEN, "pad_token": PAD_TOKEN, "mask_token": MASK_TOKEN}
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, **{key: token for key, token in named.items() if token in vocab}
    )


def corpus_hash(texts: Sequence[str]) -> str:
    """sha256 of the documents, length-prefixed so that different splits of the same text differ."""
    digest = hashlib.sha256()
    for text in texts:
        data = text.encode("utf-8")
        digest.update(len(data).to_bytes(8, "little"))
        digest.update(data)
    return digest.hexdigest()


def tokenizer_cache_path(texts: Sequence[str], vocab_size: int, cache_dir: str | os.PathLike | None) -> Path:
    """``<cache>/tokenizers/bpe-<key>.json`` with key = hash(format, vocab size, specials, corpus)."""
    key = hashlib.sha256(
        json.dumps([TOKENIZER_FORMAT, vocab_size, list(SPECIAL_TOKENS), corpus_hash(texts)]).encode()
    ).hexdigest()[:20]
    root = Path(cache_dir).expanduser() if cache_dir is not None else default_cache_dir()
    return root / "tokenizers" / f"bpe-{key}-v{vocab_size}.json"


def cached_bpe(
    texts: Sequence[str], vocab_size: int, cache_dir: str | os.PathLike | None = None
) -> PreTrainedTokenizerFast:
    """``train_bpe(texts, vocab_size)``, trained once and then read back from the cache.

    The file is written to a temporary name and renamed, so concurrent runs never read half a file.
    """
    path = tokenizer_cache_path(texts, vocab_size, cache_dir)
    if not path.is_file():
        write_atomic(path, train_bpe(texts, vocab_size).save)
    return wrap_tokenizer(Tokenizer.from_file(str(path)))


def load_tokenizer(path: str | os.PathLike) -> PreTrainedTokenizerBase:
    """A tokenizer from a saved folder (``save_pretrained``, any local HF model) or a ``tokenizer.json``."""
    path = Path(path).expanduser()
    if path.is_file():
        return wrap_tokenizer(Tokenizer.from_file(str(path)))
    if not (path / "tokenizer.json").is_file() and not (path / "tokenizer_config.json").is_file():
        raise LitlabError(
            f"no tokenizer at {path}: give a folder written by save_pretrained (a run's hf_model/) "
            "or a tokenizer.json file"
        )
    return AutoTokenizer.from_pretrained(str(path), local_files_only=True)


def _bpe_state(tokenizer: PreTrainedTokenizerBase | Tokenizer) -> dict:
    backend = tokenizer if isinstance(tokenizer, Tokenizer) else tokenizer.backend_tokenizer
    state = json.loads(backend.to_str())
    if state["model"]["type"] != "BPE":
        raise ValueError(f"expected a BPE tokenizer, got a {state['model']['type']} model")
    return state


def bpe_merges(tokenizer: PreTrainedTokenizerBase | Tokenizer) -> list[tuple[str, str]]:
    """The merges in priority order (the order the trainer learned them), as symbol pairs."""
    merges = _bpe_state(tokenizer)["model"]["merges"]
    return [tuple(m.split(" ", 1)) if isinstance(m, str) else (m[0], m[1]) for m in merges]


def subset_tokenizer(teacher: PreTrainedTokenizerBase, n_merges: int) -> PreTrainedTokenizerFast:
    """The student BPE that keeps the teacher's pre-tokeniser, specials, byte alphabet and first N merges.

    Student ids equal teacher ids for every shared token (a prefix ``0 .. len(student) - 1`` of them),
    which is what makes student encodings concatenations of per-teacher-token encodings.
    """
    state = _bpe_state(teacher)
    merges = state["model"]["merges"]
    if not 0 <= n_merges <= len(merges):
        raise ValueError(f"n_merges={n_merges} must lie in [0, {len(merges)}] (the teacher's merge count)")
    pairs = bpe_merges(teacher)
    merged = {a + b for a, b in pairs}
    vocab: dict[str, int] = state["model"]["vocab"]
    base = {token for token in vocab if token not in merged}
    keep = base | {a + b for a, b in pairs[:n_merges]}
    ids = sorted(vocab[token] for token in keep)
    if ids != list(range(len(ids))):
        raise ValueError("the teacher's ids are not laid out as specials, bytes, then merges in order")
    state["model"]["vocab"] = {token: vocab[token] for token in keep}
    state["model"]["merges"] = merges[:n_merges]
    return wrap_tokenizer(Tokenizer.from_str(json.dumps(state)))


def student_decomposition(
    teacher: PreTrainedTokenizerBase, student: PreTrainedTokenizerBase
) -> list[list[int]]:
    """d(t) for every teacher id t: the student BPE of the teacher token's byte string (specials map to
    themselves). Indexed by teacher id, length ``len(teacher)``."""
    teacher_vocab = teacher.get_vocab()
    student_model = student.backend_tokenizer.model
    student_vocab = student.get_vocab()
    specials = {token.content for token in teacher.backend_tokenizer.get_added_tokens_decoder().values()}
    table: list[list[int]] = [[] for _ in range(len(teacher_vocab))]
    for token, index in teacher_vocab.items():
        if token in specials:
            table[index] = [student_vocab[token]]
        else:
            table[index] = [piece.id for piece in student_model.tokenize(token)]
    return table


@lru_cache(maxsize=1)
def _byte_decoder() -> dict[str, int]:
    """GPT-2's inverse byte map: each of the 256 printable symbols of the byte-level alphabet → its byte."""
    printable = [
        *range(ord("!"), ord("~") + 1),
        *range(ord("¡"), ord("¬") + 1),
        *range(ord("®"), ord("ÿ") + 1),
    ]
    codes = printable + [b for b in range(256) if b not in printable]
    symbols = printable + [256 + n for n in range(256 - len(printable))]
    return {chr(symbol): byte for symbol, byte in zip(symbols, codes)}


def _components(node: object, kind: str) -> list[dict]:
    """Every ``{"type": kind, ...}`` object in a tokenizer.json subtree (Sequences are searched through)."""
    if isinstance(node, dict):
        found = [node] if node.get("type") == kind else []
        return found + [c for value in node.values() for c in _components(value, kind)]
    if isinstance(node, list):
        return [c for value in node for c in _components(value, kind)]
    return []


def _state(tokenizer: PreTrainedTokenizerBase | Tokenizer) -> dict:
    backend = tokenizer if isinstance(tokenizer, Tokenizer) else tokenizer.backend_tokenizer
    return json.loads(backend.to_str())


def is_byte_level(tokenizer: PreTrainedTokenizerBase | Tokenizer) -> bool:
    """True when tokens are byte strings in GPT-2's alphabet and no normaliser rewrites the text, so that
    every token stands for a fixed byte string (GPT-2, Llama-3, our BPEs; not Qwen2's NFC, SentencePiece
    or WordPiece)."""
    state = _state(tokenizer)
    return state.get("normalizer") is None and bool(_components(state.get("decoder"), "ByteLevel"))


def _specials(tokenizer: PreTrainedTokenizerBase) -> set[int]:
    return set(tokenizer.all_special_ids) | set(tokenizer.added_tokens_decoder)


def token_byte_lengths(tokenizer: PreTrainedTokenizerBase) -> torch.Tensor:
    """``(vocab,)`` long: the UTF-8 bytes each token stands for; special/added tokens count 0.

    Exact for byte-level tokenizers (``is_byte_level``). For the others it is the length of a token in the
    middle of a text: SentencePiece's "▁" counts as the space it replaces and a byte-fallback ``<0xNN>``
    as one byte, WordPiece's "##" and BPE's continuing/end-of-word markers count nothing. Those tokenizers
    also drop or rewrite text (dummy prefixes, normalisers, WordPiece's spaces), so exact byte totals
    of a text come from ``byte_counts``, which reads the encoding's offsets.
    """
    vocab = tokenizer.get_vocab()
    lengths = torch.zeros(max(len(tokenizer), max(vocab.values()) + 1), dtype=torch.long)
    specials = _specials(tokenizer)
    if is_byte_level(tokenizer):
        table = _byte_decoder()
        for token, index in vocab.items():
            if index not in specials:
                lengths[index] = sum(ch in table for ch in token)
        return lengths
    state = _state(tokenizer)
    model = state["model"]
    prefix = model.get("continuing_subword_prefix") or ""
    suffix = model.get("end_of_word_suffix") or ""
    # SentencePiece's space symbol: a Metaspace replacement, or what the decoder replaces by " " (Llama-2).
    spaces = {m["replacement"] for m in _components(state, "Metaspace")}
    replaced = _components(state.get("decoder"), "Replace")
    spaces |= {
        r["pattern"]["String"] for r in replaced if r.get("content") == " " and "String" in r["pattern"]
    }
    byte_fallback = bool(model.get("byte_fallback"))
    for token, index in vocab.items():
        if index in specials:
            continue
        if byte_fallback and len(token) == 6 and token.startswith("<0x") and token.endswith(">"):
            lengths[index] = 1
            continue
        if prefix and token.startswith(prefix) and len(token) > len(prefix):
            token = token[len(prefix) :]
        if suffix and token.endswith(suffix) and len(token) > len(suffix):
            token = token[: -len(suffix)]
        for space in spaces:
            token = token.replace(space, " ")
        lengths[index] = len(token.encode("utf-8"))
    return lengths


_TABLES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _byte_level_table(tokenizer: PreTrainedTokenizerBase) -> torch.Tensor | None:
    """``token_byte_lengths`` of a byte-level tokenizer, None for others; remembered per tokenizer (and
    vocabulary size), since streaming asks once per chunk."""
    cached = _TABLES.get(tokenizer)
    if cached is None or cached[0] != len(tokenizer):
        cached = (len(tokenizer), token_byte_lengths(tokenizer) if is_byte_level(tokenizer) else None)
        _TABLES[tokenizer] = cached
    return cached[1]


def _char_byte_offsets(text: str) -> np.ndarray:
    """``(len(text) + 1,)``: the UTF-8 byte offset of every character boundary of ``text``."""
    codes = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)
    widths = 1 + (codes >= 0x80).astype(np.int64) + (codes >= 0x800) + (codes >= 0x10000)
    return np.concatenate([[0], np.cumsum(widths)])


def byte_counts(
    tokenizer: PreTrainedTokenizerBase, texts: Sequence[str], encodings: Sequence[Encoding] | None = None
) -> list[torch.Tensor]:
    """Per text, ``(n_tokens,)`` long: the UTF-8 bytes of the text each token accounts for, summing to the
    text's byte length exactly whatever the tokenizer (bits per byte divides by these).

    Byte-level tokenizers use ``token_byte_lengths``. Otherwise token i accounts for the text from the end
    of token i − 1 to its own end (the encoding's offsets), so text a tokenizer drops or rewrites (spaces
    in WordPiece, a normaliser's changes, SentencePiece's dummy prefix) is charged to the next token and
    trailing text to the last one. Pass ``encodings`` (``encode_batch(texts, add_special_tokens=False)``)
    to reuse them.
    """
    if encodings is None:
        encodings = tokenizer.backend_tokenizer.encode_batch(list(texts), add_special_tokens=False)
    table = _byte_level_table(tokenizer)
    if table is not None:
        return [table[torch.tensor(e.ids, dtype=torch.long)] for e in encodings]
    counts = []
    for text, encoding in zip(texts, encodings):
        if not encoding.ids:
            counts.append(torch.zeros(0, dtype=torch.long))
            continue
        boundaries = _char_byte_offsets(text)
        ends = np.maximum.accumulate(np.asarray(encoding.offsets, dtype=np.int64)[:, 1])
        ends[-1] = len(text)
        counts.append(torch.from_numpy(np.diff(boundaries[ends], prepend=0)))
    return counts
