"""The small-vocabulary student LM trained with cross-entropy and, optionally, a distillation term on the
teacher's next-student-token targets (``DistillDataModule`` batches carry them).

Loss per predicted token: ``ce``: CE; ``kl``: 0.2·CE + 0.8·sparse KL (top-k + rest bucket) on the
targets of ``projection`` (``exact``: the cover algorithm, ``naive``: first-sub-token projection);
``label``: 0.2·CE + 0.8·the ALM-style label-only loss on the exact targets. Validation and test report
the student's own CE, perplexity and bits per byte (``LanguageModel``).
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch.nn import functional as F

from litlab.core.errors import ConfigError
from litlab.datamodules.text import IGNORE_INDEX
from litlab.lm.losses import causal_nll_terms, model_inputs
from litlab.lm.module import LanguageModel
from litlab.methods.crosstok.losses import label_only, sparse_kl
from litlab.methods.crosstok.targets import PROJECTIONS

LOSSES = ("ce", "kl", "label")


class CrossTokDistiller(LanguageModel):
    """``LanguageModel`` with the paper's distillation loss (see the module docstring).

    Args:
        loss: ``ce`` | ``kl`` | ``label``.
        projection: which teacher targets the ``kl`` loss reads: ``exact`` | ``naive`` (the ablation).
        kl_weight: weight of the distillation term (the paper's 0.8; CE gets 1 − kl_weight).
        **kwargs: ``LanguageModel`` arguments (optimizer, scheduler, arch, total_steps, ...).
    """

    def __init__(
        self, loss: str = "kl", projection: str = "exact", kl_weight: float = 0.8, **kwargs: Any
    ) -> None:
        if loss not in LOSSES:
            raise ConfigError(f"model.loss={loss!r}; choose one of {', '.join(LOSSES)}")
        if projection not in PROJECTIONS:
            raise ConfigError(f"model.projection={projection!r}; choose one of {', '.join(PROJECTIONS)}")
        if loss == "label" and projection != "exact":
            raise ConfigError("model.loss=label reads the exact targets; set model.projection=exact")
        if not 0.0 <= kl_weight <= 1.0:
            raise ConfigError(f"model.kl_weight={kl_weight} must lie in [0, 1]")
        super().__init__(**kwargs)
        self.loss_name, self.projection, self.kl_weight = loss, projection, kl_weight

    def logged_metrics(self) -> list[str]:
        return [*super().logged_metrics(), "train/ce", "train/distill"]

    def training_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> torch.Tensor:
        labels = batch["labels"][:, 1:]
        valid = labels != IGNORE_INDEX
        logits = self.lm(input_ids=batch["input_ids"], **model_inputs(batch)).logits[:, :-1][valid]
        logp = torch.log_softmax(logits.float(), -1)
        targets = labels[valid]
        ce = F.nll_loss(logp, targets, reduction="none")
        loss = ce.mean()
        size = len(batch["input_ids"])
        if self.loss_name != "ce":
            prefix = "exact" if self.loss_name == "label" else self.projection
            if self.loss_name == "kl":
                ids, probs = batch[f"{prefix}_ids"][:, 1:][valid], batch[f"{prefix}_probs"][:, 1:][valid]
                distill = sparse_kl(logp, ids, probs)
            else:
                distill = label_only(logp, targets, batch["exact_label"][:, 1:][valid])
            loss = (1 - self.kl_weight) * loss + self.kl_weight * distill.mean()
            self.log("train/distill", distill.mean().detach(), on_step=True, on_epoch=False, batch_size=size)
        n_bytes = batch["byte_counts"][:, 1:][valid].sum().clamp_min(1)
        self.log("train/loss", loss.detach(), on_step=True, on_epoch=False, prog_bar=True, batch_size=size)
        self.log("train/ce", ce.mean().detach(), on_step=True, on_epoch=False, batch_size=size)
        bpb = ce.sum().detach() / math.log(2) / n_bytes
        self.log("train/bpb", bpb, on_step=True, on_epoch=False, batch_size=size)
        return loss


@torch.no_grad()
def evaluate_bpb(module: LanguageModel, loader: Any) -> dict[str, float]:
    """Summed student CE over ``loader``: ``loss`` (nats/token), ``ppl``, ``bpb`` and the counts."""
    was_training = module.lm.training
    module.lm.eval()
    total = None
    for batch in loader:
        batch = {k: v.to(module.device) for k, v in batch.items()}
        terms = causal_nll_terms(module.lm, batch, module.token_bytes)
        total = terms if total is None else total + terms
    module.lm.train(was_training)
    return total.summary()
