"""Synthetic multi-key retrieval in long filler text, the small-scale SparseD task (RULER-style needles).

One example, one character per token (a byte-level tokenizer without merges), ``length`` tokens in all:

- the context: a window of tinyshakespeare with ``n_keys`` needles ``{kk:VVVVVVVV}`` written over it at
  random places (kk two distinct digits per needle, V from 16 capital letters);
- the question, which ends the prompt: `` {k1,k2:`` naming two of the needles;
- the answer (``gen_length`` = 2 × ``value_length`` tokens): both values, concatenated.

Batches are LLaDA SFT batches: ``input_ids (B, L)``, ``labels`` (-100 on the prompt, which is never masked),
``byte_counts``. Each split takes its filler from its own part of the file (90/5/5 by bytes), so no
test context was seen in training. Generated with numpy from ``(seed, split)`` and cached.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch
from transformers import PreTrainedTokenizerBase

from litlab.core.cache import cached_tensors
from litlab.core.errors import ConfigError
from litlab.datamodules.base import GlobalBatchDataModule, batch_loader
from litlab.datamodules.text import IGNORE_INDEX, text_file
from litlab.datamodules.tokenizers import cached_bpe

GENERATOR_VERSION = "2"
VALUE_LETTERS = np.frombuffer(b"ABCDEFGHIJKLMNOP", dtype=np.uint8)
SPLITS = {"train": (0.0, 0.9), "val": (0.9, 0.95), "test": (0.95, 1.0)}
QUESTION_CHARS = 8  # " {k1,k2:"


def byte_tokenizer(cache_dir: str | None = None) -> PreTrainedTokenizerBase:
    """A byte-level tokenizer with no merges: every ASCII character is one token (ids as in litlab.lm)."""
    return cached_bpe([bytes(range(32, 127)).decode()], vocab_size=259, cache_dir=cache_dir)


def byte_ids(tokenizer: PreTrainedTokenizerBase) -> np.ndarray:
    """``(256,)`` the token id of each ASCII byte (-1 for bytes that are not one token)."""
    table = np.full(256, -1, dtype=np.int64)
    for byte in [10, *range(32, 127)]:
        ids = tokenizer.encode(chr(byte), add_special_tokens=False)
        if len(ids) == 1:
            table[byte] = ids[0]
    return table


def needle_bytes(keys: np.ndarray, values: np.ndarray) -> np.ndarray:
    """``(..., 5 + value_length)`` ASCII of needles ``{kk:V...}`` from ``keys (...)`` in 0..99 and
    ``values (..., value_length)`` in 0..15."""
    digits = np.stack([keys // 10, keys % 10], -1).astype(np.uint8) + ord("0")
    shape = keys.shape
    open_ = np.full((*shape, 1), ord("{"), np.uint8)
    colon = np.full((*shape, 1), ord(":"), np.uint8)
    close = np.full((*shape, 1), ord("}"), np.uint8)
    return np.concatenate([open_, digits, colon, VALUE_LETTERS[values], close], -1)


def make_examples(
    corpus: np.ndarray, n: int, length: int, n_keys: int, value_length: int, seed: int
) -> dict[str, np.ndarray]:
    """``n`` examples as ASCII bytes: ``text (n, length)``, ``prompt_length``, ``needle_start (n, n_keys)``
    positions, and ``asked (n, 2)`` which needles the question names. ``corpus``: uint8 filler text."""
    rng = np.random.default_rng(seed)
    gen_length = 2 * value_length
    prompt_length = length - gen_length
    context = prompt_length - QUESTION_CHARS
    needle = 5 + value_length
    segment = context // n_keys
    if segment < needle or len(corpus) <= length:
        raise ConfigError(f"length={length} leaves no room for {n_keys} needles of {needle} characters")
    starts = rng.integers(0, len(corpus) - length, n)
    text = corpus[starts[:, None] + np.arange(length)].copy()
    keys = np.argsort(rng.random((n, 100)), 1)[:, :n_keys]
    values = rng.integers(0, len(VALUE_LETTERS), (n, n_keys, value_length))
    needle_start = np.arange(n_keys) * segment + rng.integers(0, segment - needle + 1, (n, n_keys))
    rows = np.arange(n)[:, None, None]
    text[rows, needle_start[..., None] + np.arange(needle)] = needle_bytes(keys, values)
    asked = np.argsort(rng.random((n, n_keys)), 1)[:, :2]
    asked_keys = np.take_along_axis(keys, asked, 1)
    digits = np.stack([asked_keys // 10, asked_keys % 10], -1).astype(np.uint8) + ord("0")
    question = np.concatenate(
        [
            np.full((n, 2), [ord(" "), ord("{")], np.uint8),
            digits[:, 0],
            np.full((n, 1), ord(","), np.uint8),
            digits[:, 1],
            np.full((n, 1), ord(":"), np.uint8),
        ],
        1,
    )
    text[:, context:prompt_length] = question
    answer = VALUE_LETTERS[np.take_along_axis(values, asked[..., None], 1)].reshape(n, gen_length)
    text[:, prompt_length:] = answer
    return {
        "text": text,
        "needle_start": needle_start,
        "asked": asked,
        "prompt_length": np.array(prompt_length),
    }


class RetrievalTextDataModule(GlobalBatchDataModule):
    """Multi-key retrieval in tinyshakespeare filler (see the module docstring) as LLaDA SFT batches.

    Args:
        length: tokens per example (prompt + answer).
        n_keys: needles in each context (two are asked).
        value_length: letters per value; the answer has ``2 · value_length`` tokens.
        n_train, n_val, n_test: examples per split.
        batch_size: the global batch; ``eval_batch_size`` defaults to it.
        root: folder holding tinyshakespeare.txt (default: ``$LITLAB_DATA_ROOT/text``, then the shipped copy).
        prompt_labels: labels on every token (LLaDA pretraining on whole examples: filler, needles and
            question are masked and predicted too), not only on the answer (SFT).
        cache_dir: tokenizer cache. seed: seeds the examples (split s uses seed·3 + its index) and shuffling.
    """

    def __init__(
        self,
        length: int = 256,
        n_keys: int = 6,
        value_length: int = 8,
        n_train: int = 8000,
        n_val: int = 128,
        n_test: int = 256,
        batch_size: int = 16,
        eval_batch_size: int | None = None,
        root: str | None = None,
        prompt_labels: bool = False,
        cache_dir: str | None = None,
        seed: int = 0,
        num_workers: int = 0,
    ) -> None:
        super().__init__(batch_size, num_workers)
        if min(n_train, n_val, n_test) < 1 or n_keys < 2 or value_length < 1:
            raise ConfigError("data.n_train/n_val/n_test must be positive, n_keys >= 2, value_length >= 1")
        self.length, self.n_keys, self.value_length = length, n_keys, value_length
        self.sizes = {"train": n_train, "val": n_val, "test": n_test}
        self.eval_batch_size = eval_batch_size or batch_size
        self.root, self.cache_dir, self.seed = root, cache_dir, seed
        self.prompt_labels = prompt_labels
        self.tokenizer: PreTrainedTokenizerBase | None = None
        self.splits: dict[str, dict[str, torch.Tensor]] = {}

    @property
    def gen_length(self) -> int:
        return 2 * self.value_length

    def data_spec(self) -> dict[str, Any]:
        """The byte ``tokenizer`` the model is built from and the ``block_size`` it attends over."""
        if self.tokenizer is None:
            self.tokenizer = byte_tokenizer(self.cache_dir)
        return {"tokenizer": self.tokenizer, "block_size": self.length, "gen_length": self.gen_length}

    def split(self, name: str) -> dict[str, torch.Tensor]:
        """One split's tensors (cached): ``input_ids``, ``labels``, ``byte_counts`` ``(n, L)``, ``needle_start
        (n, n_keys)``, ``asked (n, 2)``."""
        if name not in self.splits:
            self.splits[name] = self._build(name)
        return self.splits[name]

    def _build(self, name: str) -> dict[str, torch.Tensor]:
        path = text_file("tinyshakespeare", self.root)
        key = {
            "file_bytes": path.stat().st_size,
            "split": name,
            "n": self.sizes[name],
            "length": self.length,
            "n_keys": self.n_keys,
            "value_length": self.value_length,
            "seed": self.seed,
            "prompt_labels": self.prompt_labels,
        }
        ids = byte_ids(self.data_spec()["tokenizer"])

        def build() -> dict[str, np.ndarray]:
            data = np.frombuffer(Path(path).read_bytes(), dtype=np.uint8)
            lo, hi = SPLITS[name]
            corpus = data[int(lo * len(data)) : int(hi * len(data))]
            corpus = corpus[ids[corpus] >= 0]  # characters that are one token each
            seed = self.seed * 3 + list(SPLITS).index(name)
            examples = make_examples(
                corpus, self.sizes[name], self.length, self.n_keys, self.value_length, seed
            )
            input_ids = ids[examples["text"]]
            labels = np.full_like(input_ids, IGNORE_INDEX)
            prompt = 0 if self.prompt_labels else int(examples["prompt_length"])
            labels[:, prompt:] = input_ids[:, prompt:]
            return {
                "input_ids": input_ids,
                "labels": labels,
                "byte_counts": (labels != IGNORE_INDEX).astype(np.int64),
                "needle_start": examples["needle_start"],
                "asked": examples["asked"],
            }

        return cached_tensors("retrieval_text", name, GENERATOR_VERSION, key, build)

    def continuations(self, n: int, seed: int) -> torch.Tensor:
        """``(n, length)`` plain test-split filler windows (no needles): decoding their last ``gen_length``
        tokens is text continuation, whose tokens depend on the context at every distance."""
        data = np.frombuffer(Path(text_file("tinyshakespeare", self.root)).read_bytes(), dtype=np.uint8)
        ids = byte_ids(self.data_spec()["tokenizer"])
        lo, hi = SPLITS["test"]
        corpus = data[int(lo * len(data)) : int(hi * len(data))]
        corpus = corpus[ids[corpus] >= 0]
        starts = np.random.default_rng(seed).integers(0, len(corpus) - self.length, n)
        return torch.from_numpy(ids[corpus[starts[:, None] + np.arange(self.length)]])

    def setup(self, stage: str | None = None) -> None:
        for name in ("train", "val", "test"):
            self.split(name)

    def _loader(self, name: str, batch_size: int, shuffle: bool) -> Any:
        dataset = _SFTDataset(self.split(name))
        return batch_loader(dataset, batch_size, shuffle, self.seed, self.num_workers)

    def train_dataloader(self) -> Any:
        return self._loader("train", self.per_device_batch_size, shuffle=True)

    def val_dataloader(self) -> Any:
        return self._loader("val", self.eval_batch_size, shuffle=False)

    def test_dataloader(self) -> Any:
        return self._loader("test", self.eval_batch_size, shuffle=False)


class _SFTDataset(torch.utils.data.Dataset):
    """Rows of ``input_ids``, ``labels`` and ``byte_counts``; a batch is gathered with one index op."""

    def __init__(self, tensors: dict[str, torch.Tensor]) -> None:
        self.tensors = {k: tensors[k] for k in ("input_ids", "labels", "byte_counts")}

    def __len__(self) -> int:
        return len(self.tensors["input_ids"])

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        return self.__getitems__([index])

    def __getitems__(self, indices: list[int]) -> dict[str, torch.Tensor]:
        index = torch.as_tensor(indices, dtype=torch.long)
        return {k: v[index] for k, v in self.tensors.items()}
