"""A teacher/student tokenizer pair in the subset case, checked once and turned into lookup tables.

Preconditions (each failure names itself in one line): both tokenizers are byte-level BPEs with no
normaliser, they share the pre-tokeniser, the student's merges are the teacher's first N merges, and every
student token has the teacher's id. Then the student encoding of any text is the concatenation of d(t), the
student encodings of its teacher tokens (the recursive structure of BPE the paper builds on).
"""

from __future__ import annotations

import json
from functools import cached_property, lru_cache

import torch
from transformers import PreTrainedTokenizerBase

from litlab.core.errors import LitlabError
from litlab.datamodules.tokenizers import bpe_merges, is_byte_level, student_decomposition

PAD_DECOMPOSITION = -1  # fills the (V_T, max |d(t)|) table past the end of each d(t)


@lru_cache(maxsize=1)
def gpt2_byte_decoder() -> dict[str, int]:
    """GPT-2's byte-level alphabet inverted: each of the 256 printable symbols → the byte it stands for."""
    printable = [
        *range(ord("!"), ord("~") + 1),
        *range(ord("¡"), ord("¬") + 1),
        *range(ord("®"), ord("ÿ") + 1),
    ]
    codes = printable + [b for b in range(256) if b not in printable]
    symbols = printable + [256 + n for n in range(256 - len(printable))]
    return {chr(symbol): byte for symbol, byte in zip(symbols, codes)}


def _backend_state(tokenizer: PreTrainedTokenizerBase) -> dict:
    return json.loads(tokenizer.backend_tokenizer.to_str())


def check_subset_pair(teacher: PreTrainedTokenizerBase, student: PreTrainedTokenizerBase) -> None:
    """Raise a one-line LitlabError naming the first subset-case precondition the pair fails."""
    for role, tok in (("teacher", teacher), ("student", student)):
        kind = _backend_state(tok)["model"]["type"]
        if kind != "BPE":
            raise LitlabError(f"crosstok subset case: the {role} is a {kind} tokenizer, not a BPE")
        if not is_byte_level(tok):
            raise LitlabError(
                f"crosstok subset case: the {role} is not byte-level (a normaliser, or no ByteLevel decoder)"
            )
    t_state, s_state = _backend_state(teacher), _backend_state(student)
    if t_state["pre_tokenizer"] != s_state["pre_tokenizer"]:
        raise LitlabError("crosstok subset case: teacher and student use different pre-tokenisers")
    pre = t_state["pre_tokenizer"] or {}
    if pre.get("type") != "ByteLevel" or not pre.get("use_regex", True):
        raise LitlabError(
            "crosstok subset case: the pre-tokeniser is not GPT-2's ByteLevel regex (pre-token boundaries "
            "are proven stable only for it)"
        )
    t_merges, s_merges = bpe_merges(teacher), bpe_merges(student)
    if t_merges[: len(s_merges)] != s_merges:
        first = (
            next(i for i, (a, b) in enumerate(zip(t_merges, s_merges)) if a != b)
            if len(s_merges) <= len(t_merges)
            else len(t_merges)
        )
        raise LitlabError(
            f"crosstok subset case: the student's merges are not the teacher's first {len(s_merges)} "
            f"(they differ from merge {first} on)"
        )
    t_vocab = teacher.get_vocab()
    moved = [tok for tok, i in student.get_vocab().items() if t_vocab.get(tok) != i]
    if moved:
        raise LitlabError(
            f"crosstok subset case: {len(moved)} student tokens lack the teacher's id (e.g. {moved[0]!r})"
        )


class SubsetPair:
    """The tables of a checked subset pair.

    Attributes:
        decomposition: ``(V_T, max_len)`` long, d(t) padded with -1.
        lengths: ``(V_T,)`` long, |d(t)|.
        first: ``(V_T,)`` long, d(t)[0] (the sparse "first student token" map).
        token_bytes: the byte string of each teacher id (b"" for special tokens).
        special: ``(V_T,)`` bool, special/added tokens (they decompose to themselves).
        self_canonical: ``(V_T,)`` bool, t alone is the teacher's encoding of its own bytes.
    """

    def __init__(self, teacher: PreTrainedTokenizerBase, student: PreTrainedTokenizerBase) -> None:
        check_subset_pair(teacher, student)
        self.teacher, self.student = teacher, student
        self.teacher_size, self.student_size = len(teacher), len(student)
        table = student_decomposition(teacher, student)
        self.lengths = torch.tensor([len(d) for d in table])
        self.decomposition = torch.full((len(table), int(self.lengths.max())), PAD_DECOMPOSITION)
        for t, d in enumerate(table):
            self.decomposition[t, : len(d)] = torch.tensor(d)
        self.first = self.decomposition[:, 0].clone()
        specials = set(teacher.all_special_ids) | set(teacher.added_tokens_decoder)
        self.special = torch.zeros(self.teacher_size, dtype=torch.bool)
        self.special[sorted(specials)] = True
        decoder = gpt2_byte_decoder()
        tokens = teacher.convert_ids_to_tokens(list(range(self.teacher_size)))
        self.token_bytes = [
            b"" if self.special[i] else bytes(decoder[ch] for ch in tok) for i, tok in enumerate(tokens)
        ]
        self.space_led = torch.tensor([b[:1] == b" " for b in self.token_bytes])
        encoded = self.encode_many([b for b in self.token_bytes])
        self.self_canonical = torch.tensor(
            [bool(self.special[i]) or enc == [i] for i, enc in enumerate(encoded)]
        )

    def encode_many(self, texts: list[bytes]) -> list[list[int] | None]:
        """The teacher encoding of each byte string (None when it is not valid UTF-8: no text has it)."""
        strings, where = [], []
        for i, raw in enumerate(texts):
            try:
                strings.append(raw.decode("utf-8"))
                where.append(i)
            except UnicodeDecodeError:
                pass
        out: list[list[int] | None] = [None] * len(texts)
        encodings = self.teacher.backend_tokenizer.encode_batch(strings, add_special_tokens=False)
        for i, enc in zip(where, encodings):
            out[i] = enc.ids
        return out

    def encode(self, raw: bytes) -> list[int] | None:
        return self.encode_many([raw])[0]

    def decompose(self, teacher_ids: list[int]) -> list[int]:
        """The student ids of a teacher id sequence: the concatenation of d(t)."""
        return [s for t in teacher_ids for s in self.decomposition[t, : self.lengths[t]].tolist()]

    def student_bytes(self, student_ids: list[int]) -> bytes:
        """The bytes a student id sequence stands for (student ids are teacher ids)."""
        return b"".join(self.token_bytes[s] for s in student_ids)

    @cached_property
    def trie(self) -> dict[tuple[int, ...], torch.Tensor]:
        """Proper prefix r of d(t) (length ≥ 1) → the non-special teacher ids t whose d(t) starts with r and
        is longer: every teacher token that can straddle the end of a student prefix ending in r."""
        children: dict[tuple[int, ...], list[int]] = {}
        for t in range(self.teacher_size):
            if self.special[t]:
                continue
            d = tuple(self.decomposition[t, : self.lengths[t]].tolist())
            for k in range(1, len(d)):
                children.setdefault(d[:k], []).append(t)
        return {key: torch.tensor(ids) for key, ids in children.items()}


def stable_boundary(previous: bytes, token: bytes) -> bool:
    """True when ``token`` after the text ``previous`` starts a pre-token that no continuation can move:
    ``token`` begins with a space and ``previous`` ends in printable ASCII other than a space (no GPT-2
    pre-tokeniser alternative spans a non-space followed by a space), or nothing precedes it."""
    if not previous:
        return True
    return token[:1] == b" " and 0x21 <= previous[-1] <= 0x7E
