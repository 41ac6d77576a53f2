"""Decode the retrieval test prompts with dense attention and with SparseD's arms; score each arm against the
dense decoding (token agreement, exact match) and the true answers (accuracy), with its kept-tile density
and attention FLOPs relative to dense."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import torch
from transformers import PreTrainedModel

from litlab.core.progress import track
from litlab.methods.sparsed.decoding import generate

# The arms of the small-scale check (keyword overrides of the SparseD call); 'dense' is the reference.
ARMS: dict[str, dict[str, Any]] = {
    "sparsed": {},
    "no_skip_s0": {"s": 0.0},
    "head_average": {"head_average": True},
    "no_isolated": {"isolated": False},
    "recompute_every_step": {"recompute": True},
    "sink_window": {"pattern": "sink_window"},
}


def arm_metrics(
    generated: torch.Tensor, dense: torch.Tensor, answers: torch.Tensor, swapped: torch.Tensor | None = None
) -> dict[str, float]:
    """``(B, G)`` generations → agreement with dense (token share, whole-answer exact match) and accuracy
    against the true ``answers`` (token share, exact match); with ``swapped`` (the two asked values in the
    other order) also the token share that answers the other key: as high as the accuracy when a model
    copies the needles' values but cannot tell which key was asked."""
    same, right = generated == dense, generated == answers
    metrics = {
        "agreement": same.float().mean().item(),
        "exact_match_dense": same.all(1).float().mean().item(),
        "token_accuracy": right.float().mean().item(),
        "exact_match": right.all(1).float().mean().item(),
    }
    if swapped is not None:
        metrics["swapped_token_accuracy"] = (generated == swapped).float().mean().item()
    return metrics


def swap_values(answers: torch.Tensor) -> torch.Tensor:
    """``(B, 2V)`` answers of two concatenated values → the same values in the other order."""
    first, second = answers.chunk(2, dim=1)
    return torch.cat([second, first], dim=1)


def compare_arms(
    model: PreTrainedModel,
    input_ids: torch.Tensor,
    gen_length: int,
    steps: int,
    s: float = 0.2,
    rho: float = 0.3,
    block: int = 16,
    arms: Mapping[str, Mapping[str, Any]] | None = None,
    batch_size: int = 32,
    two_values: bool = False,
) -> list[dict[str, Any]]:
    """One row per arm (dense first) for the examples ``input_ids (N, P + G)`` whose last ``gen_length``
    tokens are the answers: the metrics of :func:`arm_metrics` (with the swapped-value accuracy when the
    answers are ``two_values``, as in retrieval), density, attention cost and seconds."""
    arms = ARMS if arms is None else arms
    prompts, answers = input_ids[:, :-gen_length], input_ids[:, -gen_length:]
    settings = {"dense": {"attention": "dense"}} | {
        name: {"attention": "sparsed", "s": s, "rho": rho, "block": block, **kw} for name, kw in arms.items()
    }
    outputs: dict[str, dict[str, Any]] = {}
    for name, kwargs in track(list(settings.items()), "SparseD arms"):
        start, pieces, density, cost = time.perf_counter(), [], [], []
        for rows in torch.split(prompts, batch_size):
            out = generate(model, rows, gen_length, steps, **kwargs)
            pieces.append(out.sequences[:, -gen_length:])
            density.append(out.density)
            cost.append(out.attention_cost)
        outputs[name] = {
            "generated": torch.cat(pieces),
            "density": sum(density) / len(density),
            "attention_cost": sum(cost) / len(cost),
            "seconds": time.perf_counter() - start,
        }
    dense = outputs["dense"]["generated"]
    swapped = swap_values(answers) if two_values else None
    rows = []
    for name, out in outputs.items():
        rows.append(
            {
                "arm": name,
                **arm_metrics(out["generated"], dense, answers, swapped),
                "density": out["density"],
                "attention_cost": out["attention_cost"],
                "seconds": out["seconds"],
            }
        )
    return rows
