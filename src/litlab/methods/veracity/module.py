"""LightningModules: the substrate LM trained on tagged proofs (``VeracityLM``) and the amortised verifier
(``AVIVerifier``, AVI) fine-tuned from it on Veracity Search pseudo-labels."""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from typing import Any

import lightning as L
import torch
import torch.nn.functional as F
from torch import nn

from litlab.core.errors import LitlabError
from litlab.datamodules.prontoqa import EOS, PAD, VOCAB
from litlab.lm.models import build_lm, llama_config
from litlab.methods.veracity.scoring import Batch, tag_ids, tag_logits
from litlab.optim import OptimizerFactory, step_scheduled


def substrate_config(arch: Mapping[str, Any], max_positions: int = 192) -> Any:
    """The tiny LLaMA config of the closed ProntoQA vocabulary (``arch``: ``llama_config`` keywords)."""
    arch = {"max_position_embeddings": max_positions, **dict(arch)}
    return llama_config(vocab_size=len(VOCAB), bos_token_id=EOS, eos_token_id=EOS, pad_token_id=PAD, **arch)


def causal_loss(model: nn.Module, input_ids: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Mean next-token cross-entropy over labelled positions (``labels`` unshifted, -100 ignored)."""
    logits = model(input_ids=input_ids).logits[:, :-1]
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), labels[:, 1:].reshape(-1))


def _optimizers(
    module: L.LightningModule, factory: OptimizerFactory, scheduler: Any, total: int | None
) -> Any:
    decay = [p for p in module.parameters() if p.requires_grad and p.ndim >= 2]
    rest = [p for p in module.parameters() if p.requires_grad and p.ndim < 2]
    optimizer = factory(params=[{"params": decay}, {"params": rest, "weight_decay": 0.0}])
    if scheduler is None:
        return optimizer
    if total is None:
        total = int(module.trainer.estimated_stepping_batches)
    return step_scheduled(optimizer, scheduler(optimizer, total))


class VeracityLM(L.LightningModule):
    """A tiny causal LLaMA trained on ProntoQA-style proofs with gold step tags and the correct answer.

    Args:
        optimizer: a partial optimizer (AdamW); weight decay on matrices only.
        scheduler: a partial scheduler called with ``(optimizer, total_steps)`` (e.g. ``warmup_cosine``).
        arch: ``llama_config`` keywords (hidden_size, num_layers, num_heads, ...).
        total_steps: the scheduler's horizon (default: the Trainer's estimate; needed under the Fitter).
    """

    def __init__(
        self,
        optimizer: OptimizerFactory,
        scheduler: Callable[..., Any] | None = None,
        arch: dict[str, Any] | None = None,
        total_steps: int | None = None,
    ) -> None:
        super().__init__()
        self.save_hyperparameters(logger=False, ignore=["optimizer", "scheduler"])
        self.optimizer_factory, self.scheduler_factory = optimizer, scheduler
        self.arch, self.total_steps = dict(arch or {}), total_steps
        self.lm: nn.Module | None = None

    def logged_metrics(self) -> list[str]:
        return ["train/loss", "val/loss", "test/loss"]

    def bind_data(self, spec: Mapping[str, Any]) -> None:
        """Build the LM for the data's closed vocabulary (``ProntoQADataModule.data_spec``)."""
        if spec["vocab_size"] != len(VOCAB):
            raise LitlabError(f"VeracityLM needs the ProntoQA vocabulary ({len(VOCAB)} words)")
        self.lm = build_lm(substrate_config(self.arch, max(192, int(spec["block_size"]))))

    def setup(self, stage: str) -> None:
        if self.lm is None:
            raise LitlabError("call bind_data(data.data_spec()) before fitting (litlab-train does)")

    def training_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> torch.Tensor:
        loss = causal_loss(self.lm, *batch)
        self.log("train/loss", loss, prog_bar=True, batch_size=len(batch[0]))
        return loss

    def validation_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> None:
        self.log("val/loss", causal_loss(self.lm, *batch), prog_bar=True, batch_size=len(batch[0]))

    def test_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> None:
        self.log("test/loss", causal_loss(self.lm, *batch), batch_size=len(batch[0]))

    def configure_optimizers(self) -> Any:
        return _optimizers(self, self.optimizer_factory, self.scheduler_factory, self.total_steps)


def hide_tags(batch: Batch) -> torch.Tensor:
    """The verifier's input: every tag slot set to the unknown tag (``<?>``) and the row cut after the last
    step (no answer)."""
    tokens, slots = batch["tokens"], batch["slots"]
    length = int(slots.max()) + 1
    out = tokens[:, :length].clone()
    rows = torch.arange(len(tokens))[:, None].expand_as(slots)
    valid = slots >= 0
    out[rows[valid], slots[valid]] = tag_ids(batch)[:, 2, None].expand_as(slots)[valid]
    return out


class AVIVerifier(L.LightningModule):
    """AVI: a copy of the substrate LM fine-tuned to tag each step from (context, steps) alone, by
    cross-entropy on the two tag tokens at every slot, against Veracity Search pseudo-labels.

    Batches are ``(inputs (B, L), slots (B, S), targets (B, S), tag ids (B, 3))`` with ``inputs`` from
    :func:`hide_tags` and targets 1 = true, 0 = false, -1 = no step. One forward pass tags a whole chain.
    """

    def __init__(
        self, lm: nn.Module, optimizer: OptimizerFactory, scheduler: Any = None, total_steps: int = 1
    ):
        super().__init__()
        self.lm = copy.deepcopy(lm)
        self.optimizer_factory, self.scheduler_factory, self.total_steps = optimizer, scheduler, total_steps

    def loss(self, batch: tuple[torch.Tensor, ...]) -> torch.Tensor:
        inputs, slots, targets, ids = batch
        logp = tag_logits(self.lm, inputs, slots, ids)  # (B, S, 2): (true, false)
        return F.nll_loss(logp.reshape(-1, 2), torch.where(targets >= 0, 1 - targets, -100).reshape(-1))

    def training_step(self, batch: tuple[torch.Tensor, ...], batch_idx: int) -> torch.Tensor:
        loss = self.loss(batch)
        self.log("train/loss", loss, batch_size=len(batch[0]))
        return loss

    @torch.no_grad()
    def predict(self, batch: Batch, chunk: int = 512) -> torch.Tensor:
        """``(B, S)`` bool tags (True = step true) of ``batch``'s chains in one pass per ``chunk`` chains,
        without the answer."""
        self.lm.eval()
        inputs, slots, ids = hide_tags(batch), batch["slots"], tag_ids(batch)
        logp = torch.cat(
            [
                tag_logits(self.lm, inputs[i : i + chunk], slots[i : i + chunk], ids[i : i + chunk])
                for i in range(0, len(inputs), chunk)
            ]
        )
        return (logp[..., 0] >= logp[..., 1]) | (slots < 0)

    def configure_optimizers(self) -> Any:
        return _optimizers(self, self.optimizer_factory, self.scheduler_factory, self.total_steps)
