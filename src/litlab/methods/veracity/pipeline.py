"""One seed of the Veracity Search experiment: label chains with VS and the baselines, fit AVI on VS
pseudo-labels (never gold labels), and score every method against the gold step labels."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import torch
from torch import nn

from litlab.datamodules.base import TensorBatchDataset, batch_loader
from litlab.datamodules.prontoqa import ProblemConfig, problems
from litlab.fitting import Fitter
from litlab.lm.module import warmup_cosine
from litlab.methods.veracity.baselines import all_true, per_step_judge, random_tags
from litlab.methods.veracity.metrics import step_metrics
from litlab.methods.veracity.module import AVIVerifier, hide_tags
from litlab.methods.veracity.scoring import Batch, lm_score_fn, tag_ids
from litlab.methods.veracity.search import veracity_search

EVAL_SETS = {
    "in-distribution": {"depth_min": 2, "depth_max": 4, "split": "train"},
    "unseen ontologies": {"depth_min": 2, "depth_max": 4, "split": "heldout"},
    "deeper proofs": {"depth_min": 5, "depth_max": 6, "split": "train"},
}


@dataclass
class SearchSettings:
    """How VS searches: exhaustive up to ``exhaustive_max_steps`` steps, Metropolis beyond."""

    exhaustive_max_steps: int = 5
    iterations: int = 16
    restarts: int = 2
    temperature: float = 1.0
    block_prob: float = 0.25
    extra: dict[str, Any] = field(default_factory=dict)

    def run(self, lm: nn.Module, batch: Batch, answer_term: bool = True, seed: int = 0) -> torch.Tensor:
        """VS tags ``(B, S)`` of the chains of ``batch`` (True = step true)."""
        result = veracity_search(
            lm_score_fn(lm, batch, answer_term),
            batch["n_steps"],
            batch["slots"].shape[1],
            exhaustive_max_steps=self.exhaustive_max_steps,
            iterations=self.iterations,
            restarts=self.restarts,
            temperature=self.temperature,
            block_prob=self.block_prob,
            seed=seed,
        )
        return result.assignment


def fit_avi(
    fitter: Fitter, lm: nn.Module, batch: Batch, labels: torch.Tensor, steps: int, lr: float, seed: int
) -> AVIVerifier:
    """Fine-tune a copy of ``lm`` on ``labels`` (VS pseudo-labels, True = step true) of ``batch``'s chains."""
    targets = torch.where(batch["slots"] >= 0, labels.long(), -1)
    dataset = TensorBatchDataset(hide_tags(batch), batch["slots"], targets, tag_ids(batch).contiguous())
    avi = AVIVerifier(
        lm,
        optimizer=partial(torch.optim.AdamW, lr=lr, weight_decay=0.0),
        scheduler=partial(warmup_cosine, warmup_steps=max(1, steps // 10)),
        total_steps=steps,
    )
    fitter.fit(avi, batch_loader(dataset, 32, True, seed, 0), max_steps=steps, seed=seed)
    return avi


def run_seed(
    fitter: Fitter,
    lm: nn.Module,
    seed: int,
    eval_size: int,
    avi_train_size: int,
    avi_steps: int,
    avi_lr: float,
    search: SearchSettings,
    sets: dict[str, dict[str, Any]] | None = None,
    ablations: bool = True,
    encode: Callable[[Batch], Batch] | None = None,
) -> list[dict[str, Any]]:
    """Rows ``{set, method, f1, precision, recall, step_accuracy, localisation}`` for one seed.

    Methods: VS, VS without the answer term (ablation), per-step judging, random (at the VS labels' false
    rate on the AVI training chains), all-true, and AVI (trained on VS labels of training-ontology chains).
    ``encode`` re-encodes the problems for ``lm``'s tokenizer (a ``hf_scorer.Reencoder``; None = ours).
    """
    encode = encode or (lambda batch: batch)
    train = encode(problems(avi_train_size, ProblemConfig(), seed * 101 + 1))
    pseudo = search.run(lm, train, seed=seed)
    valid = train["slots"] >= 0
    false_rate = float((~pseudo & valid).sum() / valid.sum())
    avi = fit_avi(fitter, lm, train, pseudo, avi_steps, avi_lr, seed)
    rows = []
    for index, (name, config) in enumerate((sets or EVAL_SETS).items()):
        batch = encode(problems(eval_size, ProblemConfig(**config), seed * 101 + 10 + index))
        predictions = {
            "VS": search.run(lm, batch, seed=seed),
            "AVI (zero-shot)": avi.predict(batch),
            "per-step judging": per_step_judge(lm, batch),
            "random": random_tags(batch["slots"], false_rate, seed),
            "all-true": all_true(batch["slots"]),
        }
        if ablations:
            predictions["VS without answer"] = search.run(lm, batch, answer_term=False, seed=seed)
        for method, tags in predictions.items():
            rows.append({"seed": seed, "set": name, "method": method, **step_metrics(tags, batch["labels"])})
    return rows
