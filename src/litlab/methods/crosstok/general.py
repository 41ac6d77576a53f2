"""The general case: next-student-token probabilities for ANY byte-level student vocabulary (not a subset of
the teacher's), from the teacher's exact next-byte distribution.

A student prefix σ (text x) has P(s | σ) ∝ P(y starts with x and S(y) starts with σ·s | y starts with x),
y a text drawn from the byte LM and S the student tokenizer (end of text is the student's EOS). Two ways:

- ``lossless_next``: enumerates byte continuations of x, resolving the student's tokens at each stable
  pre-token boundary (a space after printable ASCII: everything before it has a fixed encoding) or at end of
  text. Exact whenever every continuation resolves within ``max_bytes`` (a finite byte LM: ``Restricted``).
- ``approximate_next``: the official code's fast approximation (candidates from greedy byte rollouts,
  P(v) ≈ P(bytes of v) minus the rolled-out mass the student would merge further), renormalised.

``brute_force_next`` is the definition itself (every complete text of a finite byte LM, encoded whole).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol

import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from litlab.core.errors import LitlabError
from litlab.datamodules.tokenizers import is_byte_level, subset_tokenizer
from litlab.methods.crosstok.cover import CoverState, CrossTokenizerScorer
from litlab.methods.crosstok.pair import SubsetPair, _backend_state, gpt2_byte_decoder

END = 256  # index of end of text in a (257,) next-byte distribution
STATE_CACHE_SIZE = 50_000  # teacher states kept by TeacherBytes (each holds a KV cache)


class ByteLM(Protocol):
    def logprobs(self, text: bytes) -> torch.Tensor:
        """``(257,)`` float64: log P(next byte | text), index 256 = end of text."""
        ...


class TeacherBytes:
    """The teacher's exact next-byte distribution: the subset case with 0 merges (bytes are a subset of any
    byte-level vocabulary). States are cached by text, so a tree of continuations costs one forward per node.
    Special tokens other than EOS are dropped and the rest renormalised."""

    def __init__(self, model: PreTrainedModel, teacher: PreTrainedTokenizerBase) -> None:
        pair = SubsetPair(teacher, subset_tokenizer(teacher, 0))
        self.scorer = CrossTokenizerScorer(model, pair)
        if teacher.eos_token_id is None:
            raise LitlabError("crosstok general case: the teacher tokenizer has no EOS token (end of text)")
        self._id = {pair.token_bytes[i][0]: i for i in range(pair.student_size) if not pair.special[i]}
        self._index = torch.tensor([*(self._id[b] for b in range(256)), teacher.eos_token_id])
        self._states: dict[bytes, CoverState] = {b"": self.scorer.start()}

    def _state(self, text: bytes) -> CoverState:
        state = self._states.get(text)
        if state is None:
            state = self.scorer.advance(self._state(text[:-1]), self._id[text[-1]])
            if len(self._states) >= STATE_CACHE_SIZE:
                self._states = {b"": self._states[b""]}
            self._states[text] = state
        return state

    def logprobs(self, text: bytes) -> torch.Tensor:
        full = self.scorer.next_logprobs(self._state(text)).cpu()[self._index]
        return full - torch.logsumexp(full, 0)


class Restricted:
    """A finite byte LM: ``base`` restricted to ``alphabet`` and end of text, renormalised, and ended at
    ``max_bytes`` bytes of text (every text is then finite, so marginals can be enumerated exactly)."""

    def __init__(self, base: ByteLM, alphabet: bytes, max_bytes: int) -> None:
        self.base, self.max_bytes = base, max_bytes
        self._keep = torch.tensor([*sorted(set(alphabet)), END])

    def logprobs(self, text: bytes) -> torch.Tensor:
        out = torch.full((257,), -math.inf, dtype=torch.float64)
        if len(text) >= self.max_bytes:
            out[END] = 0.0
            return out
        kept = self.base.logprobs(text)[self._keep].double()
        out[self._keep] = kept - torch.logsumexp(kept, 0)
        return out


class Student:
    """Any byte-level student tokenizer with GPT-2's ByteLevel regex pre-tokeniser (whose boundaries before
    a space after printable ASCII no continuation can move) and an EOS token; its encodings are cached."""

    def __init__(self, tokenizer: PreTrainedTokenizerBase) -> None:
        if not is_byte_level(tokenizer):
            raise LitlabError(
                "crosstok general case: the student is not byte-level (a normaliser, or no ByteLevel decoder)"
            )
        pre = _backend_state(tokenizer)["pre_tokenizer"] or {}
        if pre.get("type") != "ByteLevel" or not pre.get("use_regex", True):
            raise LitlabError(
                "crosstok general case: the student's pre-tokeniser is not GPT-2's ByteLevel regex "
                "(pre-token boundaries are proven stable only for it)"
            )
        if tokenizer.eos_token_id is None:
            raise LitlabError("crosstok general case: the student tokenizer has no EOS token (end of text)")
        self.tokenizer, self.size, self.eos_id = tokenizer, len(tokenizer), tokenizer.eos_token_id
        decoder, specials = gpt2_byte_decoder(), set(tokenizer.all_special_ids)
        tokens = tokenizer.convert_ids_to_tokens(list(range(self.size)))
        self.token_bytes = [
            b"" if i in specials else bytes(decoder[c] for c in t) for i, t in enumerate(tokens)
        ]
        self._cache: dict[bytes, tuple[int, ...] | None] = {}

    def encode(self, raw: bytes) -> tuple[int, ...] | None:
        """S(raw), or None when ``raw`` is not valid UTF-8 (no text has that encoding)."""
        if raw not in self._cache:
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError:
                self._cache[raw] = None
            else:
                enc = self.tokenizer.backend_tokenizer.encode(text, add_special_tokens=False).ids
                self._cache[raw] = tuple(enc)
        return self._cache[raw]

    def text(self, ids: list[int]) -> bytes:
        if any(not self.token_bytes[s] for s in ids):
            raise LitlabError("crosstok general case: the student prefix contains a special token")
        return b"".join(self.token_bytes[s] for s in ids)


@dataclass(frozen=True)
class NextToken:
    """``logprobs``: ``(V_S,)`` float64 log P(s | σ) (sums to 1). ``log_prefix``: log P(S(y) starts with σ | y
    starts with x). ``unresolved``: probability of continuations cut at ``max_bytes`` (0 = exact).
    ``byte_calls``: next-byte distributions read."""

    logprobs: torch.Tensor
    log_prefix: float
    unresolved: float
    byte_calls: int


def _opens(text: bytes, byte: int) -> bool:
    """True when ``byte`` after ``text`` starts a stable pre-token: a space after printable ASCII."""
    return byte == 0x20 and bool(text) and 0x21 <= text[-1] <= 0x7E


def _resolve(student: Student, region: bytes, want: tuple[int, ...], end: bool) -> tuple[int | None, tuple]:
    """Match a closed region's encoding against the student tokens still wanted. Returns (s, ()) when it
    decides the next token s, (None, rest) to go on wanting ``rest`` in the next region, (-1, ()) when S(y)
    does not start with σ."""
    enc = student.encode(region)
    if enc is None or enc[: len(want)] != want[: len(enc)]:
        return -1, ()
    if len(enc) > len(want):
        return enc[len(want)], ()
    if end:
        return (student.eos_id, ()) if len(enc) == len(want) else (-1, ())
    return None, want[len(enc) :]


def _normalised(mass: torch.Tensor) -> torch.Tensor:
    total = mass.sum()
    if total <= 0:
        raise LitlabError("crosstok general case: the student prefix has probability 0 under the byte LM")
    return mass.log() - total.log()


def lossless_next(byte_lm: ByteLM, student: Student, sigma: list[int], max_bytes: int = 64) -> NextToken:
    """Exact P(s | σ) by enumerating byte continuations of σ's text until each decides the student's next
    token (a stable boundary or end of text closes the open pre-token), pruning those that leave σ."""
    x = student.text([int(s) for s in sigma])
    want, start = tuple(int(s) for s in sigma), 0
    for i in range(1, len(x)):  # boundaries inside x: the regions before them must match σ token by token
        if _opens(x[:i], x[i]):
            s, want = _resolve(student, x[start:i], want, end=False)
            if s is not None:
                raise LitlabError("crosstok general case: σ is not the student's encoding of its text")
            start = i
    mass = torch.zeros(student.size, dtype=torch.float64)
    frontier, unresolved, calls = [(x, 0.0, start, want)], 0.0, 0
    for depth in range(max_bytes + 1):
        nxt = []
        for text, logp, start, want in frontier:
            if depth == max_bytes:
                unresolved += math.exp(logp)
                continue
            lp = byte_lm.logprobs(text)
            calls += 1
            wanted = b"".join(student.token_bytes[s] for s in want)
            for b in torch.isfinite(lp).nonzero().flatten().tolist():
                p = logp + float(lp[b])
                if b == END or _opens(text, b):
                    s, rest = _resolve(student, text[start:], want, end=b == END)
                    if s is not None:
                        if s >= 0:
                            mass[s] += math.exp(p)
                        continue
                    nxt.append((text + bytes([b]), p, len(text), rest))
                    continue
                region = text[start:] + bytes([b])
                if region[: len(wanted)] == wanted[: len(region)]:
                    nxt.append((text + bytes([b]), p, start, want))
        frontier = nxt
        if not frontier:
            break
    return NextToken(_normalised(mass), math.log(max(mass.sum().item(), 1e-300)), unresolved, calls)


def brute_force_next(byte_lm: ByteLM, student: Student, sigma: list[int]) -> torch.Tensor:
    """The definition: every complete text y = x·z of a finite byte LM, encoded whole.
    Returns ``(V_S,)`` log P(s | σ)."""
    sigma = [int(s) for s in sigma]
    texts: list[tuple[bytes, float]] = []
    stack = [(student.text(sigma), 0.0)]
    while stack:
        text, logp = stack.pop()
        lp = byte_lm.logprobs(text)
        for b in torch.isfinite(lp).nonzero().flatten().tolist():
            if b == END:
                texts.append((text, logp + float(lp[b])))
            else:
                stack.append((text + bytes([b]), logp + float(lp[b])))
    mass = torch.zeros(student.size, dtype=torch.float64)
    n = len(sigma)
    for text, logp in texts:
        enc = student.encode(text)
        if enc is not None and list(enc[:n]) == sigma:
            mass[enc[n] if len(enc) > n else student.eos_id] += math.exp(logp)
    return _normalised(mass)


def _greedy(byte_lm: ByteLM, text: bytes, steps: int) -> bytes:
    """Extend ``text`` by its most likely next byte up to ``steps`` times, stopping before end of text or a
    stable pre-token boundary."""
    for _ in range(steps):
        b = int(byte_lm.logprobs(text).argmax())
        if b == END or _opens(text, b):
            break
        text += bytes([b])
    return text


def approximate_next(
    byte_lm: ByteLM,
    student: Student,
    sigma: list[int],
    extra: tuple[int, ...] = (),
    top_bytes: int = 3,
    min_p: float = 0.1,
    rollout: int = 20,
    merge_top: int = 4,
    merge_steps: int = 10,
) -> torch.Tensor:
    """The official fast approximation of P(s | σ), ``(V_S,)`` float64 log-probs (−inf off the candidates).

    Candidates: ``extra`` (the gold token, the student's argmax) and the first student token of a greedy
    rollout (≤ ``rollout`` bytes, to a boundary) from each of the ``top_bytes`` next bytes with p ≥ ``min_p``.
    P(v) ≈ P(bytes of v | x)·(1 − Σ P(c | x·v)) over the ``merge_top`` next bytes c whose greedy rollout
    (≤ ``merge_steps``) the student would merge into a longer first token; renormalised over candidates."""
    x = student.text([int(s) for s in sigma])
    lp0 = byte_lm.logprobs(x)
    candidates = {int(v) for v in extra}
    for b in lp0.topk(top_bytes).indices.tolist():
        if math.exp(float(lp0[b])) < min_p:
            continue
        if b == END:
            candidates.add(student.eos_id)
            continue
        enc = student.encode(_greedy(byte_lm, x + bytes([b]), rollout - 1)[len(x) :])
        if enc:
            candidates.add(enc[0])
    log_p = torch.full((student.size,), -math.inf, dtype=torch.float64)
    for v in candidates:
        if v == student.eos_id:
            log_p[v] = lp0[END]
            continue
        if not student.token_bytes[v]:  # other special tokens: no text reaches them
            continue
        text, logp = x, 0.0
        for b in student.token_bytes[v]:
            logp += float(byte_lm.logprobs(text)[b])
            text += bytes([b])
        if not math.isfinite(logp):
            continue
        lp = byte_lm.logprobs(text)
        merged = 0.0
        for c in lp.topk(merge_top).indices.tolist():
            if c == END or _opens(text, c) or not math.isfinite(float(lp[c])):
                continue
            enc = student.encode(_greedy(byte_lm, text + bytes([c]), merge_steps - 1)[len(x) :])
            if not enc or enc[0] != v:
                merged += math.exp(float(lp[c]))
        log_p[v] = logp + math.log(max(1.0 - merged, 0.0)) if merged < 1.0 else -math.inf
    return _normalised(log_p.exp().nan_to_num(0.0))


def total_variation(logp: torch.Tensor, logq: torch.Tensor) -> float:
    """½ Σ |p − q| between two ``(V,)`` log-probability vectors."""
    return 0.5 * float((logp.exp() - logq.exp()).abs().sum())
