"""The LightningModule that pretrains or fine-tunes a tiny LM (causal or masked diffusion) and exports it.

The HF model is built in ``bind_data`` from the data's tokenizer (its vocabulary and special ids size the
model), or loaded from ``pretrained_path`` (any local HF checkpoint). After fitting,
the best weights and the tokenizer are written with ``save_pretrained`` to ``export_dir`` (by default
``<run>/hf_model``): the folder other methods load with ``litlab.lm.models.load_pretrained``.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import lightning as L
import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from litlab.core.errors import ConfigError, LitlabError
from litlab.datamodules.tokenizers import token_byte_lengths
from litlab.lm.attention import use_block_attention
from litlab.lm.diffusion import diffusion_generate
from litlab.lm.generation import generate_text
from litlab.lm.losses import NLLTerms, causal_nll_terms, diffusion_nll_terms, nll_terms
from litlab.lm.models import OBJECTIVES, build_lm, is_masked_diffusion, llama_config, load_pretrained
from litlab.optim import (
    OptimizerFactory,
    SchedulerFactory,
    step_scheduled,
    warmup_cosine,  # noqa: F401 (litlab.lm and config targets name it here)
)

log = logging.getLogger("litlab")


class LanguageModel(L.LightningModule):
    """Train an LM on ``{"input_ids", "labels"[, "attention_mask", "byte_counts", "block_mask"]}`` batches;
    log loss, perplexity and bits per byte.

    The model is built in ``bind_data(spec)`` from the data's tokenizer (``TextDataModule.data_spec()``),
    or loaded from ``pretrained_path``. It also trains under ``litlab.fitting.Fitter`` (give
    ``total_steps`` for the scheduler there).

    Args:
        optimizer: a partial optimizer (AdamW); weight decay applies to matrices only.
        scheduler: a partial scheduler called with ``total_steps`` (e.g. ``warmup_cosine``), stepped per step.
        objective: ``causal`` (next-token CE) or ``masked_diffusion`` (LLaDA: t ~ U(0, 1), mask with
            probability t, CE on masked tokens weighted 1/t).
        arch: ``llama_config`` keywords (hidden_size, num_layers, num_heads, ...) for a new model.
        pretrained_path: a local HF folder to start from instead (model and tokenizer; ``arch`` unused).
        export_dir: where the final model and tokenizer are saved (``null``: not exported).
        diffusion_eps: LLaDA's minimum mask probability eps in p = (1 − eps)·t + eps.
        eval_draws: mask draws per sequence of the masked-diffusion validation/test bound
            (``diffusion_nll_terms``, seeded per batch: the same weights always get the same score).
        block_attention: accept per-head block masks (``batch["block_mask"]``, see ``litlab.lm.attention``).
        total_steps: the scheduler's horizon; default the Trainer's estimated stepping batches.
        sample_prompts: prompts whose continuations are written to ``<run>/samples.txt`` after fitting.
        sample_tokens: tokens generated per sample.
    """

    def __init__(
        self,
        optimizer: OptimizerFactory,
        scheduler: SchedulerFactory | None = None,
        objective: str = "causal",
        arch: dict[str, Any] | None = None,
        pretrained_path: str | None = None,
        export_dir: str | None = None,
        diffusion_eps: float = 1e-3,
        eval_draws: int = 8,
        block_attention: bool = False,
        total_steps: int | None = None,
        sample_prompts: Sequence[str] = (),
        sample_tokens: int = 64,
    ) -> None:
        super().__init__()
        # Plain containers (not omegaconf nodes), so checkpoints load with torch.load(weights_only=True).
        arch, sample_prompts = dict(arch or {}), list(sample_prompts)
        if objective not in OBJECTIVES:
            raise ConfigError(f"model.objective={objective!r}; choose one of {', '.join(OBJECTIVES)}")
        if eval_draws < 1:
            raise ConfigError(f"model.eval_draws={eval_draws} must be at least 1")
        self.save_hyperparameters(logger=False, ignore=["optimizer", "scheduler"])
        self.optimizer_factory = optimizer
        self.scheduler_factory = scheduler
        self.objective = objective
        self.arch = arch
        self.diffusion_eps = diffusion_eps
        self.eval_draws = eval_draws
        self.block_attention = block_attention
        self.total_steps = total_steps
        self.export_dir = export_dir
        self.sample_prompts = sample_prompts
        self.sample_tokens = sample_tokens
        self.lm: PreTrainedModel | None = None
        self.tokenizer: PreTrainedTokenizerBase | None = None
        self._sums: dict[str, torch.Tensor] = {}  # stage → (nll, tokens, bytes) summed over batches
        if pretrained_path:
            self.lm, self.tokenizer = load_pretrained(pretrained_path)
            if is_masked_diffusion(self.lm.config) != (objective == "masked_diffusion"):
                kind = "masked-diffusion" if is_masked_diffusion(self.lm.config) else "causal"
                raise LitlabError(f"{pretrained_path} holds a {kind} model but model.objective={objective}")
            self._attach(self.tokenizer)

    # -- model
    def logged_metrics(self) -> list[str]:
        """The keys this module logs (``litlab.contract``)."""
        return ["train/loss", "train/bpb"] + [
            f"{s}/{k}" for s in ("val", "test") for k in ("loss", "ppl", "bpb")
        ]

    def bind_data(self, spec: Mapping[str, Any]) -> None:
        """Build the model from the data's ``tokenizer`` (or check that a loaded one matches it)."""
        tokenizer = spec["tokenizer"]
        if self.lm is None:
            self.build(tokenizer)
        elif tokenizer.get_vocab() != self.tokenizer.get_vocab():
            raise LitlabError(
                "the data's tokenizer differs from the model's; set data.tokenizer_path to the checkpoint "
                "folder (model.pretrained_path) so the data is encoded as the model expects"
            )
        positions = getattr(self.lm.config, "max_position_embeddings", None)
        if positions is not None and spec.get("block_size", 0) > positions:
            raise ConfigError(
                f"data.block_size={spec['block_size']} exceeds the model's {positions} positions; raise "
                "model.arch.max_position_embeddings or lower data.block_size"
            )

    def build(self, tokenizer: PreTrainedTokenizerBase) -> None:
        """Create a fresh model sized by ``tokenizer`` (vocabulary, BOS/EOS/pad/mask ids) and ``arch``."""
        config = llama_config(
            vocab_size=len(tokenizer),
            bos_token_id=tokenizer.bos_token_id,
            eos_token_id=tokenizer.eos_token_id,
            pad_token_id=tokenizer.pad_token_id,
            mask_token_id=tokenizer.mask_token_id,
            **self.arch,
        )
        self.lm = build_lm(config, self.objective)
        self.tokenizer = tokenizer
        self._attach(tokenizer)

    def _attach(self, tokenizer: PreTrainedTokenizerBase) -> None:
        self.register_buffer("token_bytes", token_byte_lengths(tokenizer), persistent=False)
        self.mask_token_id = getattr(self.lm.config, "mask_token_id", None)
        if self.mask_token_id is None:
            self.mask_token_id = tokenizer.mask_token_id
        if self.objective == "masked_diffusion" and self.mask_token_id is None:
            raise LitlabError("a masked-diffusion model needs a tokenizer with a mask token")
        if self.block_attention:
            use_block_attention(self.lm)

    def setup(self, stage: str) -> None:
        if self.lm is None:
            raise LitlabError(
                "the model is built from the data's tokenizer: call bind_data(data.data_spec()) "
                "(litlab-train does) or build(tokenizer) before fitting"
            )

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        """``logits: (B, L, V)`` for ``input_ids: (B, L)``."""
        return self.lm(input_ids=input_ids, attention_mask=attention_mask).logits

    def nll(self, batch: dict[str, torch.Tensor], generator: torch.Generator | None = None) -> NLLTerms:
        """Summed NLL, tokens and bytes of a batch under the training objective (override to change the
        loss): causal cross-entropy, or one draw of LLaDA's estimate."""
        return nll_terms(self.lm, batch, self.token_bytes, self.mask_token_id, self.diffusion_eps, generator)

    def eval_nll(self, batch: dict[str, torch.Tensor], batch_idx: int) -> NLLTerms:
        """The validation/test terms: the causal NLL, or the masked-diffusion bound from ``eval_draws``
        mask draws seeded by the batch index (so the same weights always get the same score)."""
        if self.objective == "causal":
            return causal_nll_terms(self.lm, batch, self.token_bytes)
        generator = torch.Generator(self.device).manual_seed(batch_idx)
        return diffusion_nll_terms(
            self.lm, batch, self.token_bytes, self.mask_token_id, self.eval_draws, generator
        )

    # -- steps
    def training_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> torch.Tensor:
        terms = self.nll(batch)
        loss = terms.nll / terms.tokens.clamp_min(1)
        size = len(batch["input_ids"])
        self.log("train/loss", loss, on_step=True, on_epoch=False, prog_bar=True, batch_size=size)
        bpb = terms.nll.detach() / math.log(2) / terms.bytes.clamp_min(1)
        self.log("train/bpb", bpb, on_step=True, on_epoch=False, batch_size=size)
        return loss

    def _eval_step(self, batch: dict[str, torch.Tensor], batch_idx: int, stage: str) -> None:
        terms = self.eval_nll(batch, batch_idx)
        values = torch.stack([terms.nll.detach().double(), terms.tokens.double(), terms.bytes.double()])
        self._sums[stage] = values if stage not in self._sums else self._sums[stage] + values

    def _eval_epoch_end(self, stage: str) -> None:
        """Log loss, perplexity and bpb from the NLL, token and byte sums of all processes."""
        sums = self._sums.pop(stage, torch.zeros(3, dtype=torch.float64, device=self.device))
        nll, tokens, n_bytes = self.all_gather(sums).reshape(-1, 3).sum(0)
        if tokens == 0:
            return
        summary = NLLTerms(nll, tokens, n_bytes).summary()
        for key in ("loss", "ppl", "bpb"):
            self.log(f"{stage}/{key}", summary[key], prog_bar=key != "ppl", sync_dist=False)

    def validation_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> None:
        self._eval_step(batch, batch_idx, "val")

    def on_validation_epoch_end(self) -> None:
        self._eval_epoch_end("val")

    def test_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> None:
        self._eval_step(batch, batch_idx, "test")

    def on_test_epoch_end(self) -> None:
        self._eval_epoch_end("test")

    def configure_optimizers(self) -> Any:
        decay = [p for p in self.lm.parameters() if p.requires_grad and p.ndim >= 2]
        no_decay = [p for p in self.lm.parameters() if p.requires_grad and p.ndim < 2]
        optimizer = self.optimizer_factory(
            params=[{"params": decay}, {"params": no_decay, "weight_decay": 0.0}]
        )
        if self.scheduler_factory is None:
            return optimizer
        total = self.total_steps
        if total is None:
            if self._trainer is None:
                raise LitlabError(
                    "the scheduler needs total_steps= outside a Lightning Trainer (e.g. the Fitter)"
                )
            total = int(self.trainer.estimated_stepping_batches)
        scheduler = self.scheduler_factory(optimizer=optimizer, total_steps=total)
        return step_scheduled(optimizer, scheduler)

    # -- export
    def on_fit_end(self) -> None:
        """Load the best checkpoint's weights (if one was tracked), then export them and write samples
        (under a Lightning Trainer; the Fitter restores its own best weights)."""
        if self._trainer is None:
            return
        callback = self.trainer.checkpoint_callback
        best = getattr(callback, "best_model_path", "") if callback is not None else ""
        if best and Path(best).is_file():
            state = torch.load(best, map_location=self.device, weights_only=True)["state_dict"]
            self.load_state_dict(state)
        if self.trainer.is_global_zero and self.export_dir:
            self.export(self.export_dir)
            if self.sample_prompts:
                samples = self.samples(self.sample_prompts, self.sample_tokens)
                text = "\n\n".join(f"### {p!r}\n{p}{s}" for p, s in zip(self.sample_prompts, samples))
                (Path(self.trainer.default_root_dir) / "samples.txt").write_text(text + "\n")

    def export(self, directory: str | Path) -> Path:
        """``save_pretrained`` of the model and the tokenizer into ``directory`` (what methods load)."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        self.lm.save_pretrained(directory)
        self.tokenizer.save_pretrained(directory)
        log.info("exported the model and tokenizer to %s", directory)
        return directory

    @torch.no_grad()
    def samples(self, prompts: Sequence[str], max_new_tokens: int) -> list[str]:
        """Greedy continuations (causal) or masked-diffusion fills (low-confidence remasking) of prompts."""
        was_training = self.lm.training
        self.lm.eval()
        try:
            if self.objective == "causal":
                return generate_text(self.lm, self.tokenizer, prompts, max_new_tokens)
            outputs = []
            for prompt in prompts:
                ids = torch.tensor(
                    [self.tokenizer.encode(prompt, add_special_tokens=False)], device=self.device
                )
                filled = diffusion_generate(self.lm, ids, max_new_tokens, max_new_tokens, self.mask_token_id)
                outputs.append(self.tokenizer.decode(filled[0, ids.shape[1] :], skip_special_tokens=True))
            return outputs
        finally:
            self.lm.train(was_training)
