"""Distillation data: a teacher LM with its BPE, a subset student tokenizer, and student documents whose
training batches carry the teacher's sparse next-student-token targets.

The teacher (BPE of ``teacher_vocab`` ids trained on the corpus's train split, a tiny LLaMA trained for
``teacher_steps`` on all of it) is trained once and cached, or loaded from ``teacher_path``. The student
sees only ``train_documents`` paragraphs (blank-line separated) of the train split, each cut to
``max_tokens`` student tokens after BOS: the low-data regime where a teacher's soft targets carry
information the labels do not. Targets are computed per document on first use (the cover algorithm costs
one teacher forward per student token) and kept; ``precompute()`` fills them all from the disk cache.
Val/test: the first ``eval_documents`` paragraphs of the val/test splits, scored by the student's CE.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from functools import partial
from typing import Any

import torch
from torch.utils.data import DataLoader, Dataset
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from litlab.core.cache import cached_tensors
from litlab.core.errors import ConfigError
from litlab.core.progress import track
from litlab.datamodules.base import GlobalBatchDataModule, batch_collate, batch_loader
from litlab.datamodules.text import IGNORE_INDEX, BlockDataset, encode_texts, split_offsets, text_file
from litlab.datamodules.tokenizers import cached_bpe, subset_tokenizer, token_byte_lengths
from litlab.fitting import Fitter
from litlab.lm.models import build_lm, llama_config, load_pretrained
from litlab.lm.module import LanguageModel, warmup_cosine
from litlab.methods.crosstok.cover import CrossTokenizerScorer
from litlab.methods.crosstok.pair import SubsetPair
from litlab.methods.crosstok.targets import PROJECTIONS, document_targets

TARGETS_VERSION = "1"
TEACHER_VERSION = "1"
FRACTIONS = (0.9, 0.05, 0.05)


def paragraphs(text: str) -> list[str]:
    """Blank-line separated paragraphs (a speech in tinyshakespeare), stripped, non-empty."""
    return [p.strip() for p in text.split("\n\n") if p.strip()]


def train_teacher(
    tokenizer: PreTrainedTokenizerBase,
    text: str,
    arch: dict,
    steps: int,
    batch_size: int,
    block: int,
    lr: float,
    seed: int,
    fitter: Fitter | None = None,
) -> PreTrainedModel:
    """A tiny causal LLaMA trained on ``text`` (packed blocks, AdamW + warm-up/cosine) through the Fitter."""
    stream = encode_texts(tokenizer, [text])
    blocks = stream.pack(block)
    module = LanguageModel(
        partial(torch.optim.AdamW, lr=lr, weight_decay=0.1),
        partial(warmup_cosine, warmup_steps=max(1, steps // 20)),
        arch=arch,
        total_steps=steps,
    )
    module.build(tokenizer)
    loader = batch_loader(BlockDataset(blocks), batch_size, shuffle=True, seed=seed, num_workers=0)
    (fitter or Fitter(gradient_clip_val=1.0)).fit(module, loader, max_steps=steps, seed=seed)
    return module.lm.eval()


def document_rows(
    texts: list[str], tokenizer: PreTrainedTokenizerBase, max_tokens: int | None
) -> dict[str, torch.Tensor]:
    """Padded rows: BOS + up to ``max_tokens`` tokens per text (all of them with None), labels -100 on BOS
    and padding, the UTF-8 bytes of each predicted token."""
    encodings = tokenizer.backend_tokenizer.encode_batch(texts, add_special_tokens=False)
    kept = [enc.ids[:max_tokens] for enc in encodings]
    width = 1 + (max_tokens if max_tokens is not None else max(len(k) for k in kept))
    ids = torch.full((len(texts), width), tokenizer.pad_token_id, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for i, row in enumerate(kept):
        ids[i, : len(row) + 1] = torch.tensor([tokenizer.bos_token_id, *row])
        mask[i, : len(row) + 1] = 1
    labels = torch.where(mask.bool(), ids, IGNORE_INDEX)
    labels[:, 0] = IGNORE_INDEX
    lengths = token_byte_lengths(tokenizer)
    return {
        "input_ids": ids,
        "labels": labels,
        "attention_mask": mask,
        "byte_counts": torch.where(labels == IGNORE_INDEX, 0, lengths[ids]),
    }


class DocumentTargets(Dataset):
    """Student documents as padded ``(n, L + 1)`` rows; each batch gets its documents' teacher targets,
    computed on first use and kept."""

    def __init__(
        self, rows: dict[str, torch.Tensor], scorer: CrossTokenizerScorer | None, top_k: int
    ) -> None:
        self.rows, self.scorer, self.top_k = rows, scorer, top_k
        self.targets: dict[int, dict[str, torch.Tensor]] = {}

    def __len__(self) -> int:
        return len(self.rows["input_ids"])

    def document(self, i: int) -> dict[str, torch.Tensor]:
        """The targets of row ``i``: ``{exact,naive}_{ids,probs,label}`` padded to the row's length."""
        if i not in self.targets:
            width = self.rows["input_ids"].shape[1]
            n = int(self.rows["attention_mask"][i].sum()) - 1
            ids = self.rows["input_ids"][i, 1 : n + 1].tolist()
            out = {}
            with torch.no_grad():
                for projection in PROJECTIONS:
                    t = document_targets(self.scorer, ids, self.top_k, projection)
                    out[f"{projection}_ids"] = torch.zeros(width, self.top_k, dtype=torch.long)
                    out[f"{projection}_probs"] = torch.zeros(width, self.top_k)
                    out[f"{projection}_label"] = torch.zeros(width)
                    out[f"{projection}_ids"][1 : n + 1] = t.ids.cpu()
                    out[f"{projection}_probs"][1 : n + 1] = t.probs.cpu()
                    out[f"{projection}_label"][1 : n + 1] = t.label.cpu()
            self.targets[i] = out
        return self.targets[i]

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        return self.__getitems__([index])

    def __getitems__(self, indices: Sequence[int]) -> dict[str, torch.Tensor]:
        index = torch.as_tensor(indices, dtype=torch.long)
        batch = {key: value[index] for key, value in self.rows.items()}
        if self.scorer is not None:
            docs = [self.document(int(i)) for i in indices]
            batch |= {key: torch.stack([d[key] for d in docs]) for key in docs[0]}
        return batch


class DistillDataModule(GlobalBatchDataModule):
    """Teacher, subset student tokenizer and student documents with distillation targets (module doc).

    Args:
        teacher_path: a local HF folder (model + byte-level BPE tokenizer); null trains and caches one.
        corpus, root: the text file (``tinyshakespeare`` or a path) and where to look for it.
        teacher_vocab, teacher_arch, teacher_steps, teacher_batch_size, teacher_block_size, teacher_lr,
            teacher_seed: the teacher trained when ``teacher_path`` is null.
        student_merges: the student keeps the teacher's first N merges (vocabulary 3 + 256 + N).
        train_documents, eval_documents, max_tokens: student documents and their length cap.
        top_k: teacher probabilities kept per position (plus the rest bucket).
        batch_size, eval_batch_size, seed, num_workers: loaders (``seed`` shuffles the training rows).
    """

    def __init__(
        self,
        teacher_path: str | None = None,
        corpus: str = "tinyshakespeare",
        root: str | None = None,
        teacher_vocab: int = 512,
        teacher_arch: dict | None = None,
        teacher_steps: int = 600,
        teacher_batch_size: int = 16,
        teacher_block_size: int = 64,
        teacher_lr: float = 3e-3,
        teacher_seed: int = 0,
        student_merges: int = 32,
        train_documents: int = 96,
        eval_documents: int = 150,
        max_tokens: int = 48,
        top_k: int = 8,
        batch_size: int = 16,
        eval_batch_size: int | None = None,
        seed: int = 0,
        num_workers: int = 0,
    ) -> None:
        super().__init__(batch_size, num_workers)
        if student_merges < 0 or top_k < 1 or max_tokens < 2 or train_documents < 1 or eval_documents < 1:
            raise ConfigError(
                "data.student_merges must be ≥ 0, data.top_k ≥ 1, data.max_tokens ≥ 2, the document counts "
                f"≥ 1 (got {student_merges}, {top_k}, {max_tokens}, {train_documents}, {eval_documents})"
            )
        self.teacher_path = teacher_path
        self.corpus, self.root = corpus, root
        self.teacher_config = {
            "vocab": teacher_vocab,
            "arch": dict(teacher_arch or {"hidden_size": 64, "num_layers": 2, "num_heads": 2}),
            "steps": teacher_steps,
            "batch_size": teacher_batch_size,
            "block": teacher_block_size,
            "lr": teacher_lr,
            "seed": teacher_seed,
        }
        self.student_merges, self.top_k = student_merges, top_k
        self.train_documents, self.eval_documents, self.max_tokens = (
            train_documents,
            eval_documents,
            max_tokens,
        )
        self.eval_batch_size = eval_batch_size or batch_size
        self.seed = seed
        self.teacher: PreTrainedModel | None = None
        self.pair: SubsetPair | None = None
        self.datasets: dict[str, DocumentTargets] = {}

    # -- building
    def _splits(self) -> list[str]:
        data = text_file(self.corpus, self.root).read_bytes()
        offsets = split_offsets(data, FRACTIONS)
        return [data[a:b].decode("utf-8") for a, b in zip(offsets[:-1], offsets[1:])]

    def _teacher_key(self, train_text: str) -> dict[str, Any]:
        return {**self.teacher_config, "corpus": self.corpus, "train_chars": len(train_text)}

    def build_teacher(
        self, train_text: str, fitter: Fitter | None = None
    ) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
        """The teacher and its tokenizer: loaded from ``teacher_path`` or trained once and cached."""
        if self.teacher_path:
            return load_pretrained(self.teacher_path)
        cfg = self.teacher_config
        tokenizer = cached_bpe([train_text], cfg["vocab"])
        config = llama_config(
            len(tokenizer),
            bos_token_id=tokenizer.bos_token_id,
            eos_token_id=tokenizer.eos_token_id,
            pad_token_id=tokenizer.pad_token_id,
            **cfg["arch"],
        )

        def build() -> dict[str, torch.Tensor]:
            model = train_teacher(
                tokenizer,
                train_text,
                cfg["arch"],
                cfg["steps"],
                cfg["batch_size"],
                cfg["block"],
                cfg["lr"],
                cfg["seed"],
                fitter,
            )
            return {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}

        state = cached_tensors("crosstok", "teacher", TEACHER_VERSION, self._teacher_key(train_text), build)
        model = build_lm(config, "causal")
        model.load_state_dict(state)
        return model.eval(), tokenizer

    def prepare_data(self) -> None:
        self._build()

    def _build(self, fitter: Fitter | None = None) -> None:
        if self.pair is not None:
            return
        train_text, val_text, test_text = self._splits()
        self._key = self.teacher_path or self._teacher_key(train_text)
        self.teacher, teacher_tok = self.build_teacher(train_text, fitter)
        student = subset_tokenizer(teacher_tok, self.student_merges)
        self.pair = SubsetPair(teacher_tok, student)
        docs = paragraphs(train_text)
        if len(docs) < self.train_documents:
            raise ConfigError(
                f"data.train_documents={self.train_documents} exceeds the {len(docs)} paragraphs"
            )
        chosen = sorted(random.Random(0).sample(range(len(docs)), self.train_documents))
        scorer = CrossTokenizerScorer(self.teacher, self.pair)
        self.datasets = {
            "train": DocumentTargets(
                document_rows([docs[i] for i in chosen], student, self.max_tokens), scorer, self.top_k
            ),
            "val": DocumentTargets(
                document_rows(paragraphs(val_text)[: self.eval_documents], student, self.max_tokens), None, 0
            ),
            "test": DocumentTargets(
                document_rows(paragraphs(test_text)[: self.eval_documents], student, self.max_tokens), None, 0
            ),
        }

    def precompute(self, fitter: Fitter | None = None) -> None:
        """Build everything and fill the training targets (from the disk cache, or computed and cached)."""
        self._build(fitter)
        train = self.datasets["train"]
        key = {
            "teacher": self._key,
            "merges": self.student_merges,
            "docs": self.train_documents,
            "max_tokens": self.max_tokens,
            "top_k": self.top_k,
            "rows": int(train.rows["input_ids"].sum()),
        }

        def build() -> dict[str, torch.Tensor]:
            docs = [train.document(i) for i in track(range(len(train)), "crosstok targets")]
            return {key: torch.stack([d[key] for d in docs]) for key in docs[0]}

        stacked = cached_tensors("crosstok", "targets", TARGETS_VERSION, key, build)
        train.targets = {i: {k: v[i] for k, v in stacked.items()} for i in range(len(train))}

    def setup(self, stage: str | None = None) -> None:
        self._build()

    def data_spec(self) -> dict[str, Any]:
        self._build()
        return {"tokenizer": self.pair.student, "block_size": self.max_tokens + 1}

    def train_dataloader(self) -> DataLoader:
        return batch_loader(
            self.datasets["train"], self.per_device_batch_size, True, self.seed, self.num_workers
        )

    def _eval(self, split: str) -> DataLoader:
        return DataLoader(
            self.datasets[split],
            batch_size=self.eval_batch_size,
            collate_fn=batch_collate,
            num_workers=self.num_workers,
        )

    def val_dataloader(self) -> DataLoader:
        return self._eval("val")

    def test_dataloader(self) -> DataLoader:
        return self._eval("test")
