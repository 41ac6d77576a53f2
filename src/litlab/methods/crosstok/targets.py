"""Distillation targets for a small-vocabulary student: the teacher's next-student-token distribution at
every position of each document, kept sparse as the top-k probabilities plus the rest mass.

- ``exact``: the cover algorithm (one teacher forward per student token).
- ``naive``: the first-sub-token projection: the teacher's next-token distribution after the teacher
  tokens that end inside the student prefix, mapped to student ids by t → d(t)[0]; wrong whenever the
  student prefix ends inside a teacher token (it then predicts that token's first piece again).
Both also give the probability of the label token (the ALM-style label-only loss uses it).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from litlab.methods.crosstok.cover import CrossTokenizerScorer
from litlab.methods.crosstok.pair import SubsetPair

PROJECTIONS = ("exact", "naive")


@dataclass
class SparseTargets:
    """Per predicted token ``(n, k)`` top-k student ids and probabilities, and ``(n,)`` label probability."""

    ids: torch.Tensor
    probs: torch.Tensor
    label: torch.Tensor


def _sparse(logprobs: torch.Tensor, labels: torch.Tensor, k: int) -> SparseTargets:
    """Top-k of ``(n, V_S)`` log-probs and the probability of each row's label."""
    probs = logprobs.exp()
    top = probs.topk(k, dim=-1)
    return SparseTargets(top.indices, top.values.float(), probs.gather(1, labels[:, None])[:, 0].float())


def exact_targets(scorer: CrossTokenizerScorer, ids: Sequence[int], k: int) -> SparseTargets:
    """Targets for predicting each of ``ids`` (a document's student tokens after BOS) from the tokens
    before it, by the cover algorithm."""
    state, rows = scorer.start(), []
    for s in ids:
        rows.append(scorer.next_logprobs(state))
        state = scorer.advance(state, s)
    return _sparse(torch.stack(rows), torch.as_tensor(list(ids)), k)


@torch.no_grad()
def naive_targets(scorer: CrossTokenizerScorer, ids: Sequence[int], k: int) -> SparseTargets:
    """Targets by the first-sub-token projection of the teacher's distribution at the last teacher
    boundary inside each student prefix (one teacher forward over the document's teacher encoding)."""
    pair: SubsetPair = scorer.pair
    ids = list(ids)
    teacher_ids = scorer.canonical_teacher(ids)
    if teacher_ids is None:
        raise ValueError("the student ids are not the student tokenizer's encoding of their text")
    device = scorer._decomp.device
    logits = scorer.model(input_ids=torch.tensor([[scorer.bos_id, *teacher_ids]], device=device)).logits[0]
    teacher_probs = torch.softmax(logits.double(), -1)  # (1 + n_T, V_T): row m follows m teacher tokens
    student = torch.zeros(len(teacher_probs), pair.student_size, dtype=torch.float64, device=device)
    student.index_add_(1, scorer._first, teacher_probs)
    t_ends = torch.cumsum(pair.lengths[torch.tensor(teacher_ids, dtype=torch.long)], 0)  # in student tokens
    positions = torch.arange(len(ids))  # predicting ids[i] after i student tokens
    rows = torch.searchsorted(t_ends, positions, right=True)  # teacher tokens wholly inside the prefix
    return _sparse(student[rows.to(device)].clamp_min(1e-300).log(), torch.as_tensor(ids, device=device), k)


def document_targets(
    scorer: CrossTokenizerScorer, ids: Sequence[int], k: int, projection: str
) -> SparseTargets:
    """``exact_targets`` or ``naive_targets`` by name."""
    if projection not in PROJECTIONS:
        raise ValueError(f"projection={projection!r}; choose one of {', '.join(PROJECTIONS)}")
    return exact_targets(scorer, ids, k) if projection == "exact" else naive_targets(scorer, ids, k)
