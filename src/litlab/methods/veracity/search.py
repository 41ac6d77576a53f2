"""Veracity Search: the highest-reward per-step veracity assignment, exhaustively or by Metropolis search.

Exhaustive enumeration scores all 2^n assignments of an n-step chain in batches (chains grouped by n).
Long chains use the discrete MCMC of the paper (our reconstruction): start from all-true, propose flipping
one step (with probability ``block_prob`` also its successor), accept with probability min(1, exp(ΔR/τ)),
run ``restarts`` chains in parallel for ``iterations`` proposals, return the best assignment visited.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from litlab.core.errors import ConfigError
from litlab.methods.veracity.scoring import ScoreFn


@dataclass
class SearchResult:
    """The best assignment per chain ``(B, S)`` (True = step true; padding True), its reward, and the
    number of assignments scored per chain (the cost)."""

    assignment: torch.Tensor
    score: torch.Tensor
    scored: torch.Tensor


def all_assignments(n: int, width: int) -> torch.Tensor:
    """``(2^n, width)`` bool: every assignment of n steps (bit k of the index = step k false), padded True."""
    if not 0 <= n <= width:
        raise ConfigError(f"a chain of {n} steps does not fit {width} slots")
    bits = (torch.arange(2**n)[:, None] >> torch.arange(n)[None]) & 1
    return torch.cat([bits == 0, torch.ones(2**n, width - n, dtype=torch.bool)], 1)


def exhaustive_search(
    score_fn: ScoreFn, n_steps: torch.Tensor, width: int, chunk_rows: int = 64
) -> SearchResult:
    """Score every assignment of every chain (``n_steps (B,)``) and keep the best."""
    B = len(n_steps)
    best = torch.ones(B, width, dtype=torch.bool)
    score = torch.full((B,), -torch.inf)
    scored = torch.zeros(B, dtype=torch.long)
    for n in n_steps.unique().tolist():
        candidates = all_assignments(n, width)
        rows = (n_steps == n).nonzero()[:, 0]
        for part in rows.split(chunk_rows):
            values = score_fn(part, candidates[None].expand(len(part), -1, -1))
            top = values.argmax(1)
            best[part], score[part], scored[part] = candidates[top], values.max(1).values, len(candidates)
    return SearchResult(best, score, scored)


def metropolis_search(
    score_fn: ScoreFn,
    n_steps: torch.Tensor,
    width: int,
    iterations: int = 32,
    restarts: int = 2,
    temperature: float = 1.0,
    block_prob: float = 0.25,
    seed: int = 0,
) -> SearchResult:
    """Metropolis over assignments (single-step or two-step block flips), all chains and restarts batched."""
    if iterations < 0 or restarts < 1 or temperature <= 0:
        raise ConfigError("search needs iterations >= 0, restarts >= 1 and temperature > 0")
    generator = torch.Generator().manual_seed(seed)
    B, R = len(n_steps), restarts
    rows = torch.arange(B)
    state = torch.ones(B, R, width, dtype=torch.bool)
    current = score_fn(rows, state)
    best, best_score = state.clone(), current.clone()
    n = n_steps[:, None].expand(B, R)
    for _ in range(iterations):
        k = (torch.rand(B, R, generator=generator) * n).long()
        flip = torch.nn.functional.one_hot(k, width).bool()
        block = (torch.rand(B, R, generator=generator) < block_prob) & (k + 1 < n)
        flip |= torch.nn.functional.one_hot((k + 1).clamp_max(width - 1), width).bool() & block[..., None]
        proposal = state ^ flip
        value = score_fn(rows, proposal)
        accept = torch.rand(B, R, generator=generator).log() < (value - current) / temperature
        state = torch.where(accept[..., None], proposal, state)
        current = torch.where(accept, value, current)
        better = current > best_score
        best = torch.where(better[..., None], state, best)
        best_score = torch.where(better, current, best_score)
    top = best_score.argmax(1)
    scored = torch.full((B,), R * (iterations + 1), dtype=torch.long)
    return SearchResult(best[rows, top], best_score[rows, top], scored)


def veracity_search(
    score_fn: ScoreFn,
    n_steps: torch.Tensor,
    width: int,
    exhaustive_max_steps: int = 5,
    **search: float,
) -> SearchResult:
    """Exhaustive for chains of at most ``exhaustive_max_steps`` steps, Metropolis search for longer ones."""
    short = n_steps <= exhaustive_max_steps
    B = len(n_steps)
    out = SearchResult(
        torch.ones(B, width, dtype=torch.bool), torch.zeros(B), torch.zeros(B, dtype=torch.long)
    )
    for mask, run in ((short, "exhaustive"), (~short, "search")):
        rows = mask.nonzero()[:, 0]
        if not len(rows):
            continue

        def sub(part: torch.Tensor, assignments: torch.Tensor, rows: torch.Tensor = rows) -> torch.Tensor:
            return score_fn(rows[part], assignments)

        if run == "exhaustive":
            result = exhaustive_search(sub, n_steps[rows], width)
        else:
            result = metropolis_search(sub, n_steps[rows], width, **search)
        out.assignment[rows], out.score[rows], out.scored[rows] = (
            result.assignment,
            result.score,
            result.scored,
        )
    return out
