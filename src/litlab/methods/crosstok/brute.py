"""Brute-force marginalisation over canonical teacher sequences: the definition the cover algorithm must
equal, computed without boundaries, tries, KV caches or incremental state (tests and the benchmark).

P(σ) = Σ P_T(τ | BOS) over canonical teacher sequences τ whose student decoding starts with σ and whose
last token reaches the end of σ; P(s | σ) = P(σ·s) / Σ_s' P(σ·s'). Every node of the search is one full
teacher forward from BOS, so the cost grows with the number of segmentations of σ into d(t) pieces.
"""

from __future__ import annotations

import math

import torch
from transformers import PreTrainedModel

from litlab.methods.crosstok.pair import SubsetPair


def is_canonical(pair: SubsetPair, tau: list[int]) -> bool:
    """True when every special-free segment of ``tau`` is the teacher's encoding of its own bytes."""
    segment: list[int] = []
    for t in [*tau, None]:
        if t is None or pair.special[t]:
            if segment and pair.encode(b"".join(pair.token_bytes[x] for x in segment)) != segment:
                return False
            segment = []
        else:
            segment.append(t)
    return True


class BruteForce:
    """Enumerates the covers of a student prefix by depth-first search over teacher tokens."""

    def __init__(self, model: PreTrainedModel, pair: SubsetPair, bos_id: int | None = None) -> None:
        self.model = model.eval()
        self.pair = pair
        self.bos_id = pair.teacher.bos_token_id if bos_id is None else bos_id
        self.teacher_calls = 0
        self._d = [pair.decomposition[t, : pair.lengths[t]].tolist() for t in range(pair.teacher_size)]

    @torch.no_grad()
    def _logprobs(self, tau: list[int]) -> torch.Tensor:
        self.teacher_calls += 1
        device = next(self.model.parameters()).device
        ids = torch.tensor([[self.bos_id, *tau]], device=device)
        return torch.log_softmax(self.model(input_ids=ids).logits[0, -1].double(), -1)

    def covers(self, sigma: list[int]) -> tuple[list[tuple[float, int]], float]:
        """``[(log P_T(τ), s)]`` for the canonical covers τ of σ·s (all s), and log P(σ)."""
        n, found, own = len(sigma), [], []

        def visit(tau: list[int], logp: float, matched: int) -> None:
            lp = self._logprobs(tau)
            straddlers = []
            for t, d in enumerate(self._d):
                end = matched + len(d)
                if matched == n:
                    straddlers.append((t, d[0]))
                elif end <= n and sigma[matched:end] == d:
                    if end == n and is_canonical(self.pair, [*tau, t]):
                        own.append(logp + float(lp[t]))
                    visit([*tau, t], logp + float(lp[t]), end)
                elif end > n and d[: n - matched] == sigma[matched:]:
                    straddlers.append((t, d[n - matched]))
                    if is_canonical(self.pair, [*tau, t]):
                        own.append(logp + float(lp[t]))
            for t, s in straddlers:
                if is_canonical(self.pair, [*tau, t]):
                    found.append((logp + float(lp[t]), s))

        visit([], 0.0, 0)
        if n == 0:
            own.append(0.0)
        total = torch.logsumexp(torch.tensor(own, dtype=torch.float64), 0) if own else -math.inf
        return found, float(total)

    def next_logprobs(self, sigma: list[int]) -> tuple[torch.Tensor, float]:
        """``(V_S,)`` float64 log P(s | σ) and log P(σ), by enumeration."""
        found, prefix = self.covers([int(s) for s in sigma])
        weights = torch.tensor([w for w, _ in found], dtype=torch.float64)
        targets = torch.tensor([s for _, s in found])
        mass = torch.zeros(self.pair.student_size, dtype=torch.float64)
        mass.index_add_(0, targets, (weights - weights.max()).exp())
        return mass.log() - mass.sum().log(), prefix
