"""Step-level error detection scores against gold veracity labels (positive class = a false step)."""

from __future__ import annotations

import torch


def first_error(assignment: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """Index of the first false step of each chain ``(B,)``; the chain length when every step is true."""
    false = ~assignment & valid
    width = assignment.shape[1]
    index = torch.where(false, torch.arange(width)[None], width).min(1).values
    return torch.where(false.any(1), index, valid.sum(1))


def step_metrics(predicted: torch.Tensor, labels: torch.Tensor) -> dict[str, float]:
    """Precision, recall and F1 of flagging false steps, step accuracy and first-error localisation accuracy.

    ``predicted (B, S)`` bool (True = step true), ``labels (B, S)`` (1 true, 0 false, -1 no step).
    """
    valid = labels >= 0
    gold = labels == 1
    flagged, wrong = ~predicted & valid, ~gold & valid
    hits = (flagged & wrong).sum().item()
    precision = hits / max(1, flagged.sum().item())
    recall = hits / max(1, wrong.sum().item())
    f1 = 2 * precision * recall / (precision + recall) if precision + recall > 0 else 0.0
    return {
        "f1": f1,
        "precision": precision,
        "recall": recall,
        "step_accuracy": ((predicted == gold) & valid).sum().item() / valid.sum().item(),
        "localisation": (first_error(predicted, valid) == first_error(gold, valid)).float().mean().item(),
    }
