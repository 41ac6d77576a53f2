"""Exact next-student-token probabilities of a teacher LM in the subset case (the paper's cover algorithm).

The student prefix σ is split at its last stable pre-token boundary: the text before it has the fixed
teacher encoding c (the condition, one KV cache), the rest is the partial word q. A cover of σ is a
canonical teacher sequence c·e·t whose student decoding starts with σ and whose last token t reaches the
end of σ: for a split q = q[:i] | q[i:], e = T(q[:i]) (round trip d(e) = q[:i]) and t a teacher token with
d(t) starting with q[i:] (a trie lookup), kept only if T(q[:i]·t) = e·t. Its weight is P_T(c)·P_T(e | c)·
P_T(t | c, e). Then P(σ) = Σ_covers weight, and P(s | σ) ∝ Σ of the covers of σ·s: the covers of σ whose
unmatched part of d(t) starts with s, plus, for the aligned split e_q = T(q), P_T(c·e_q)·Σ P_T(t' | c, e_q)
over canonical t' with d(t')[0] = s (the sparse first-student-token map).

``CoverState.advance`` keeps the covers and the boundary cache, so each student token costs one teacher
forward (the new aligned split T(q·s)); ``CrossTokenizerScorer.state_for`` builds the same state for any
prefix from the trie in three forwards. All probabilities are float64 over float32 logits.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import torch
from transformers import PreTrainedModel

from litlab.core.errors import LitlabError
from litlab.lm.decoding import DecodeState
from litlab.methods.crosstok.pair import SubsetPair, stable_boundary

MASK_CACHE_SIZE = 50_000  # partial words whose continuation masks are kept (V_T bools each)


def _cat(parts: list[torch.Tensor], dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    return torch.cat(parts) if parts else torch.zeros(0, dtype=dtype, device=device)


@dataclass(frozen=True)
class CoverState:
    """The covers of a student prefix (immutable; ``advance`` returns a new state).

    Attributes:
        boundary: teacher state after BOS·c (c = the condition before the last stable boundary).
        base: log P_T(c | BOS).
        text: the bytes of the whole student prefix; ``last_special`` whether it ends in a special token.
        q: the student ids after the boundary (the partial word).
        aligned_logp: log P_T(c·T(q)), or -inf when q has no canonical teacher encoding.
        aligned: teacher state after c·T(q) (None with -inf); ``allowed``: ``(V_T,)`` bool, the t' with
            c·T(q)·t' canonical.
        log_w, token, offset: ``(K,)`` straddling covers: log weight, last teacher token t and how many
            of d(t)'s student tokens lie inside the prefix.
    """

    boundary: DecodeState
    base: float
    text: bytes
    last_special: bool
    q: tuple[int, ...]
    aligned_logp: float
    aligned: DecodeState | None
    allowed: torch.Tensor | None
    log_w: torch.Tensor
    token: torch.Tensor
    offset: torch.Tensor


class CrossTokenizerScorer:
    """A causal teacher LM read through a subset student vocabulary; counts its forward passes.

    Args:
        model: the teacher (any causal HF LM over the pair's teacher ids).
        pair: the checked tokenizer pair.
        bos_id: the id every text starts after (default the teacher tokenizer's BOS).
    """

    def __init__(self, model: PreTrainedModel, pair: SubsetPair, bos_id: int | None = None) -> None:
        self.model = model.eval()
        self.pair = pair
        self.bos_id = pair.teacher.bos_token_id if bos_id is None else bos_id
        if self.bos_id is None:
            raise LitlabError("crosstok: the teacher tokenizer has no BOS token; pass bos_id=")
        self.teacher_calls = 0
        self._masks: dict[tuple[bytes, bool], torch.Tensor] = {}  # partial words recur: cache their masks
        device = next(model.parameters()).device
        self._decomp = pair.decomposition.to(device)
        self._first = pair.first.to(device)
        self._lengths = pair.lengths.to(device)

    # -- teacher passes (each counted)
    def _prefill(self) -> DecodeState:
        self.teacher_calls += 1
        device = self._decomp.device
        return DecodeState.prefill(self.model, torch.tensor([[self.bos_id]], device=device))

    def _score_rows(self, state: DecodeState, rows: list[list[int]]) -> tuple[torch.Tensor, DecodeState]:
        """Summed log-probs ``(n,)`` of appending each right-padded row to ``state``; the states after."""
        width = max(1, max(len(r) for r in rows))
        ids = torch.zeros(len(rows), width, dtype=torch.long, device=self._decomp.device)
        mask = torch.zeros_like(ids)
        for i, r in enumerate(rows):
            ids[i, : len(r)] = torch.tensor(r, dtype=torch.long)
            mask[i, : len(r)] = 1
        self.teacher_calls += 1
        logp, after = state.select(torch.zeros(len(rows), dtype=torch.long)).score(ids, mask)
        return logp.double().sum(1), after

    # -- canonical encodings
    def canonical_teacher(self, student_ids: tuple[int, ...] | list[int]) -> list[int] | None:
        """T(text of ``student_ids``) when its decomposition gives back ``student_ids``, else None.
        Special tokens split the text and map to themselves."""
        pair, out, segment = self.pair, [], []
        for s in [*student_ids, None]:
            if s is None or pair.special[s]:
                if segment:
                    enc = pair.encode(pair.student_bytes(segment))
                    if enc is None or pair.decompose(enc) != segment:
                        return None
                    out += enc
                    segment = []
                if s is not None:
                    out.append(s)
            else:
                segment.append(s)
        return out

    def continuation_mask(self, q_bytes: bytes, e_q: list[int], fresh: bool) -> torch.Tensor:
        """``(V_T,)`` bool: the teacher tokens t' with T(q·t') = e_q·t' (specials always). ``fresh``: q is
        empty at a stable boundary or ends in a special token, so each token alone decides. Cached by q
        (e_q is a function of q's bytes)."""
        cached = self._masks.get((q_bytes, fresh))
        if cached is not None:
            return cached
        pair = self.pair
        mask = pair.self_canonical.clone()
        if not fresh:
            if (
                0x21 <= q_bytes[-1] <= 0x7E
            ):  # a space-led token after printable ASCII starts a stable pre-token
                todo = (~pair.special & ~pair.space_led).nonzero().flatten().tolist()
            else:
                todo = (~pair.special).nonzero().flatten().tolist()
            encoded = pair.encode_many([q_bytes + pair.token_bytes[t] for t in todo])
            ok = [enc == [*e_q, t] for t, enc in zip(todo, encoded)]
            mask[todo] = torch.tensor(ok, dtype=torch.bool)
        if len(self._masks) >= MASK_CACHE_SIZE:
            self._masks.clear()
        self._masks[(q_bytes, fresh)] = mask.to(self._decomp.device)
        return self._masks[(q_bytes, fresh)]

    # -- states
    def start(self) -> CoverState:
        """The state of the empty prefix (one forward: BOS)."""
        boundary = self._prefill()
        empty = torch.zeros(0, dtype=torch.long, device=self._decomp.device)
        return CoverState(
            boundary,
            0.0,
            b"",
            True,
            (),
            0.0,
            boundary,
            self.continuation_mask(b"", [], True),
            torch.zeros(0, dtype=torch.float64, device=empty.device),
            empty,
            empty,
        )

    def _boundary_index(self, ids: list[int]) -> int:
        """The start of the last student token that opens a stable pre-token (0 if none)."""
        special = self.pair.special
        for k in range(len(ids) - 1, 0, -1):
            if special[ids[k]] or special[ids[k - 1]]:
                return k
            if stable_boundary(self.pair.student_bytes(ids[k - 1 : k]), self.pair.token_bytes[ids[k]]):
                return k
        return 0

    def state_for(self, student_ids: list[int]) -> CoverState:
        """The covers of any student prefix, from the trie: three teacher forwards (BOS, the condition,
        every split of q in one padded batch)."""
        ids = [int(s) for s in student_ids]
        if not ids:
            return self.start()
        pair, device = self.pair, self._decomp.device
        b = self._boundary_index(ids)
        c = self.canonical_teacher(ids[:b])
        if c is None:
            raise LitlabError(
                "crosstok: the student prefix is not the student tokenizer's own encoding of its text "
                "(it has probability 0 under canonical teacher encodings)"
            )
        root = self._prefill()
        base_t, boundary = self._score_rows(root, [c]) if c else (torch.zeros(1, dtype=torch.float64), root)
        base = float(base_t[0])
        q = ids[b:]
        splits = [(i, self.canonical_teacher(q[:i])) for i in range(len(q) + 1)]
        splits = [(i, e) for i, e in splits if e is not None]
        logp_e, after = self._score_rows(boundary, [e for _, e in splits])
        next_logp = after.logprobs().double()
        log_w, token, offset = [], [], []
        aligned_logp, aligned, allowed = -math.inf, None, None
        q_bytes = pair.student_bytes(q)
        for row, (i, e) in enumerate(splits):
            if i == len(q):
                aligned_logp = base + float(logp_e[row])
                aligned = after.select(torch.tensor([row]))
                allowed = self.continuation_mask(q_bytes, e, bool(pair.special[q[-1]]))
                continue
            candidates = pair.trie.get(tuple(q[i:]))
            if candidates is None:
                continue
            left = pair.student_bytes(q[:i])
            encoded = pair.encode_many([left + pair.token_bytes[t] for t in candidates.tolist()])
            keep = torch.tensor([enc == [*e, t] for t, enc in zip(candidates.tolist(), encoded)])
            kept = candidates[keep].to(device)
            log_w.append(base + logp_e[row] + next_logp[row, kept])
            token.append(kept)
            offset.append(torch.full_like(kept, len(q) - i))
        return CoverState(
            boundary,
            base,
            pair.student_bytes(ids),
            bool(pair.special[ids[-1]]),
            tuple(q),
            aligned_logp,
            aligned,
            allowed,
            _cat(log_w, torch.float64, device),
            _cat(token, torch.long, device),
            _cat(offset, torch.long, device),
        )

    # -- distributions
    def _terms(self, state: CoverState) -> tuple[torch.Tensor, torch.Tensor]:
        """Log weights ``(K',)`` of the covers of σ·s for every s, and the student token s of each."""
        nxt = self._decomp[state.token, state.offset]
        if state.aligned is None:
            return state.log_w, nxt
        allowed = state.allowed.nonzero().flatten()
        logp = state.aligned.logprobs()[0].double()[allowed] + state.aligned_logp
        return torch.cat([state.log_w, logp]), torch.cat([nxt, self._first[allowed]])

    def next_logprobs(self, state: CoverState) -> torch.Tensor:
        """``(V_S,)`` float64: log P(s | σ) for every student token s (exact; sums to 1)."""
        log_w, target = self._terms(state)
        if len(log_w) == 0 or not torch.isfinite(log_w).any():
            raise LitlabError("crosstok: the student prefix has probability 0 under the teacher")
        top = log_w.max()
        mass = torch.zeros(self.pair.student_size, dtype=torch.float64, device=log_w.device)
        mass.index_add_(0, target, (log_w - top).exp())
        return mass.log() - mass.sum().log()

    def prefix_logprob(self, state: CoverState) -> float:
        """log P(σ): the summed weight of every cover of the prefix (no renormalisation)."""
        weights = torch.cat([state.log_w, state.log_w.new_tensor([state.aligned_logp])])
        return float(torch.logsumexp(weights, 0))

    def advance(self, state: CoverState, s: int) -> CoverState:
        """The state after student token ``s``: covers filtered and shifted, new covers from the aligned
        split's cached next-token distribution, and one teacher forward for the new aligned split."""
        pair, s = self.pair, int(s)
        keep = self._decomp[state.token, state.offset] == s
        token, offset, log_w = state.token[keep], state.offset[keep] + 1, state.log_w[keep]
        if state.aligned is not None:
            new = (state.allowed & (self._first == s) & (self._lengths > 1)).nonzero().flatten()
            token = torch.cat([token, new])
            offset = torch.cat([offset, torch.ones_like(new)])
            logp = state.aligned.logprobs()[0].double()[new] + state.aligned_logp
            log_w = torch.cat([log_w, logp])
        open_ = offset < self._lengths[token]  # a fully matched d(t) is the new aligned split's business
        token, offset, log_w = token[open_], offset[open_], log_w[open_]
        special = bool(pair.special[s])
        moves = special or state.last_special or stable_boundary(state.text, pair.token_bytes[s])
        if moves and state.aligned is not None:
            boundary, base, q = state.aligned, state.aligned_logp, (s,)
        else:
            boundary, base, q = state.boundary, state.base, (*state.q, s)
        e = self.canonical_teacher(q)
        text = state.text + pair.token_bytes[s]
        aligned_logp, aligned, allowed = -math.inf, None, None
        if e is not None:
            logp_e, aligned = self._score_rows(boundary, [e])
            aligned_logp = base + float(logp_e[0])
            allowed = self.continuation_mask(pair.student_bytes(q), e, special)
        return replace(
            state,
            boundary=boundary,
            base=base,
            text=text,
            last_special=special,
            q=q,
            aligned_logp=aligned_logp,
            aligned=aligned,
            allowed=allowed,
            log_w=log_w,
            token=token,
            offset=offset,
        )

    # -- sequences
    def score_sequence(self, student_ids: list[int]) -> tuple[torch.Tensor, float]:
        """Per-token log P(s_i | s_<i) ``(n,)`` of a student sequence after BOS (one teacher forward per
        token) and log P(σ) of the whole sequence as a prefix. With a final EOS, the sum is the sequence's
        log-likelihood under the student tokenization."""
        state, logps = self.start(), []
        for s in student_ids:
            logps.append(self.next_logprobs(state)[int(s)])
            state = self.advance(state, s)
        return torch.stack(logps) if logps else torch.zeros(0, dtype=torch.float64), self.prefix_logprob(
            state
        )
