"""ProntoQA-style proofs with corrupted steps and gold per-step veracity labels (for Veracity Search).

A problem is a fictional is-a ontology ``c0 ⊂ c1 ⊂ … ⊂ cH`` (ProntoQA's wumpus/yumpus concepts) whose top
concept has a (possibly negated) property P, an entity E with ``E is c0``, and distractor facts
(``d1 ⊂ d2`` with the opposite property, another property Q on a chain concept), shuffled. The proof is
ProntoQA's linearised modus-ponens chain ``E is c1 . … E is cH . E is [not] P .`` and the answer is the
truth of ``E is P``. Corruption swaps a step's concept for one E is not (a distractor concept or any other)
or flips the conclusion's negation; a step's gold label is the truth of its statement in the ontology.

Generalisation splits: the ordered concept pairs are split once (fixed, seed-independent) into ``train``
and ``heldout`` edges; a problem's chain and distractor edges all come from one split, so no is-a fact of
a held-out ontology appears in any training ontology. Deeper proofs: a larger ``depth`` range.

Text is space-separated words of a closed vocabulary (``VOCAB``); every step is followed by one tag token
(``<T>``/``<F>``), so all 2^n tag assignments of a chain have the same length and positions. Generation is
vectorised over problems (numpy; loops run only over proof positions). No litlab.lm or methods imports.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from litlab.core.cache import cached_tensors
from litlab.core.errors import ConfigError
from litlab.datamodules.base import GlobalBatchDataModule, TensorBatchDataset, batch_loader

GENERATOR_VERSION = "1"
SPECIALS = ["<pad>", "<eos>", "every", "is", "not", ".", "query", "?", "answer", "true", "false"]
TAGS = ["<T>", "<F>", "<?>"]  # true step, false step, unknown (the verifier's input slot)
CONCEPTS = [
    "wumpus",
    "yumpus",
    "zumpus",
    "dumpus",
    "rompus",
    "numpus",
    "tumpus",
    "vumpus",
    "impus",
    "jompus",
    "gorpus",
    "shumpus",
    "lempus",
    "sterpus",
    "grimpus",
    "lorpus",
    "brimpus",
    "kumpus",
    "fompus",
    "scrompus",
    "porpus",
    "quimpus",
    "twimpus",
    "hilpus",
]
PROPERTIES = [
    "red",
    "blue",
    "green",
    "hot",
    "cold",
    "small",
    "large",
    "bright",
    "dull",
    "sour",
    "sweet",
    "wooden",
]
ENTITIES = ["max", "alex", "sam", "rex", "fae", "wren", "polly", "stella"]
VOCAB = SPECIALS + TAGS + CONCEPTS + PROPERTIES + ENTITIES
ID = {word: index for index, word in enumerate(VOCAB)}
PAD, EOS, TRUE_TAG, FALSE_TAG, UNKNOWN_TAG = ID["<pad>"], ID["<eos>"], ID["<T>"], ID["<F>"], ID["<?>"]
HOLE = -1  # an absent token, removed when rows are compacted
SPLITS = ("train", "heldout")
HELDOUT_EDGE_FRACTION = 1 / 3
_FACT = 6  # every fact and step is laid out in 6 columns (holes where a word is absent)


def heldout_edges() -> np.ndarray:
    """``(C, C)`` bool: ordered concept pairs reserved for held-out ontologies (fixed for every seed)."""
    mask = np.random.default_rng(20260).random((len(CONCEPTS), len(CONCEPTS))) < HELDOUT_EDGE_FRACTION
    np.fill_diagonal(mask, False)
    return mask


def allowed_edges(split: str) -> np.ndarray:
    """``(C, C)`` bool: the is-a edges a problem of ``split`` may use."""
    if split not in SPLITS:
        raise ConfigError(f"data split={split!r}; choose one of {', '.join(SPLITS)}")
    held = heldout_edges()
    allowed = held if split == "heldout" else ~held
    np.fill_diagonal(allowed, False)
    return allowed


def encode(text: str) -> list[int]:
    """Word ids of ``text`` (the closed-vocabulary tokenizer: one id per space-separated word)."""
    try:
        return [ID[word] for word in text.split()]
    except KeyError as error:
        raise ConfigError(f"word {error.args[0]!r} is not in the ProntoQA vocabulary") from None


def decode(ids: Any) -> str:
    """The text of word ids (padding dropped)."""
    return " ".join(VOCAB[i] for i in np.asarray(ids).tolist() if i != PAD)


@dataclass(frozen=True)
class ProblemConfig:
    """What a set of problems looks like: proof depth range, ontology split, corruption."""

    depth_min: int = 2
    depth_max: int = 4
    split: str = "train"
    clean_fraction: float = 0.25  # chains with no corrupted step; the rest have 1 or 2 (equally likely)
    distractor_swap: float = 0.5  # a swapped concept is a context distractor (else any concept E is not)

    def check(self) -> None:
        if not 1 <= self.depth_min <= self.depth_max <= 10:
            raise ConfigError(f"depth range [{self.depth_min}, {self.depth_max}] must lie within [1, 10]")
        if not 0.0 <= self.clean_fraction <= 1.0 or not 0.0 <= self.distractor_swap <= 1.0:
            raise ConfigError("clean_fraction and distractor_swap must lie in [0, 1]")
        allowed_edges(self.split)


def _sample_chain(rng: np.random.Generator, n: int, length: int, allowed: np.ndarray) -> np.ndarray:
    """``(n, length)`` distinct concepts with each consecutive pair an allowed edge (dead ends redrawn)."""
    out = np.zeros((n, length), dtype=np.int64)
    todo = np.arange(n)
    while len(todo):
        m = len(todo)
        chain = np.zeros((m, length), dtype=np.int64)
        used = np.zeros((m, len(CONCEPTS)), dtype=bool)
        chain[:, 0] = rng.integers(len(CONCEPTS), size=m)
        used[np.arange(m), chain[:, 0]] = True
        ok = np.ones(m, dtype=bool)
        for j in range(1, length):
            score = rng.random((m, len(CONCEPTS)))
            score[~allowed[chain[:, j - 1]] | used] = -1.0
            chain[:, j] = score.argmax(1)
            ok &= score.max(1) >= 0
            used[np.arange(m), chain[:, j]] = True
        out[todo[ok]] = chain[ok]
        todo = todo[~ok]
    return out


def _distractor_edge(
    rng: np.random.Generator, outside: np.ndarray, allowed: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """An allowed edge ``d1 → d2`` between concepts outside the chain, per row (``outside: (n, C)``)."""
    n = len(outside)
    d1, d2 = np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int64)
    todo = np.arange(n)
    while len(todo):
        free = outside[todo]
        first = (rng.random(free.shape) * free - ~free).argmax(1)
        score = rng.random(free.shape)
        score[~allowed[first] | ~free] = -1.0
        ok = score.max(1) >= 0
        d1[todo[ok]], d2[todo[ok]] = first[ok], score.argmax(1)[ok]
        todo = todo[~ok]
    return d1, d2


def _compact(grid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows of ``grid`` with holes removed (right-padded) and the new position of every column."""
    keep = grid != HOLE
    position = np.cumsum(keep, axis=1) - 1
    out = np.full((grid.shape[0], int(keep.sum(1).max())), PAD, dtype=np.int64)
    rows = np.broadcast_to(np.arange(grid.shape[0])[:, None], grid.shape)
    out[rows[keep], position[keep]] = grid[keep]
    return out, position


def generate_problems(n: int, config: ProblemConfig, seed: int) -> dict[str, torch.Tensor]:
    """``n`` seeded problems as tensors (tokens carry the gold tags; see the module docstring).

    Returns ``tokens (n, L)``, ``slots (n, S)`` (tag positions, -1 past the chain), ``labels (n, S)``
    (1 true step, 0 corrupted, -1 past the chain), ``n_steps (n,)`` (= depth + 1), ``answer (n,)`` (1 =
    ``E is P`` is true), ``answer_pos (n,)`` (position of the true/false token), ``loss_start (n,)``
    (first token of the proof), ``kind (n, S)`` (0 clean, 1 distractor swap, 2 other swap, 3 negation flip).
    """
    config.check()
    rng = np.random.default_rng(seed)
    allowed = allowed_edges(config.split)
    H = config.depth_max
    C = len(CONCEPTS)
    rows = np.arange(n)
    depth = rng.integers(config.depth_min, config.depth_max + 1, size=n)
    chain = _sample_chain(rng, n, H + 1, allowed)
    outside = np.ones((n, C), dtype=bool)
    outside[rows[:, None], chain] = False
    d1, d2 = _distractor_edge(rng, outside, allowed)
    entity = rng.integers(len(ENTITIES), size=n)
    p = rng.integers(len(PROPERTIES), size=n)
    q = (p + rng.integers(1, len(PROPERTIES), size=n)) % len(PROPERTIES)
    positive = rng.random(n) < 0.5
    top = chain[rows, depth]
    e_id = np.array([ID[w] for w in ENTITIES])[entity]
    c_id = np.array([ID[w] for w in CONCEPTS])
    p_id = np.array([ID[w] for w in PROPERTIES])
    every, is_, not_, dot = ID["every"], ID["is"], ID["not"], ID["."]

    def fact(
        a: np.ndarray, b: np.ndarray, negated: np.ndarray | bool = False, head: int = every
    ) -> np.ndarray:
        cols = [np.full(n, head), a, np.full(n, is_), np.where(negated, not_, HOLE), b, np.full(n, dot)]
        return np.stack([np.broadcast_to(c, (n,)) for c in cols], 1)

    facts = [fact(c_id[chain[:, j]], c_id[chain[:, j + 1]]) for j in range(H)]
    for j in range(H):  # edges beyond the proof's depth are absent
        facts[j][depth <= j] = HOLE
    facts += [
        fact(c_id[top], p_id[p], ~positive),
        fact(c_id[d1], c_id[d2]),
        fact(c_id[d2], p_id[p], positive),  # the opposite property on an unrelated concept
        fact(c_id[chain[rows, rng.integers(0, depth + 1)]], p_id[q], rng.random(n) < 0.5),
        fact(e_id, c_id[chain[:, 0]], head=HOLE),
    ]
    facts = np.stack(facts, 1)  # (n, F, 6)
    facts = np.take_along_axis(facts, rng.random(facts.shape[:2]).argsort(1)[..., None], 1)

    # Corruption: 0 (clean_fraction), else 1 or 2 distinct steps among the depth + 1.
    n_steps = depth + 1
    S = H + 1
    n_bad = np.where(rng.random(n) < config.clean_fraction, 0, rng.integers(1, 3, size=n))
    n_bad = np.minimum(n_bad, n_steps)
    order = np.where(np.arange(S)[None] < n_steps[:, None], rng.random((n, S)), 2.0).argsort(1).argsort(1)
    bad = order < n_bad[:, None]
    is_conclusion = np.arange(S)[None] == depth[:, None]
    kind = np.zeros((n, S), dtype=np.int64)
    use_distractor = rng.random((n, S)) < config.distractor_swap
    kind[bad & ~is_conclusion] = np.where(use_distractor, 1, 2)[bad & ~is_conclusion]
    kind[bad & is_conclusion] = 3
    # Swap targets: a context distractor (d1 or d2) or any concept outside the chain.
    other = (rng.random((n, S, C)) * outside[:, None] - (~outside[:, None])).argmax(2)
    distractor = np.where(rng.random((n, S)) < 0.5, d1[:, None], d2[:, None])
    swapped = np.where(kind == 1, distractor, other)
    step_concept = np.where(kind > 0, swapped, np.concatenate([chain[:, 1:], chain[:, -1:]], 1))
    step_word = np.where(is_conclusion, p_id[p][:, None], c_id[step_concept])
    step_negated = is_conclusion & (~positive[:, None] ^ (kind == 3))
    steps = np.stack(
        [
            np.broadcast_to(e_id[:, None], (n, S)),
            np.full((n, S), is_),
            np.where(step_negated, not_, HOLE),
            step_word,
            np.full((n, S), dot),
            np.where(bad, FALSE_TAG, TRUE_TAG),
        ],
        2,
    )
    steps[np.arange(S)[None] > depth[:, None]] = HOLE
    question = np.stack([np.full(n, ID["query"]), e_id, np.full(n, is_), p_id[p], np.full(n, ID["?"])], 1)
    answer = np.stack(
        [np.full(n, ID["answer"]), np.where(positive, ID["true"], ID["false"]), np.full(n, EOS)], 1
    )
    parts = [np.full((n, 1), EOS), facts.reshape(n, -1), question, steps.reshape(n, -1), answer]
    grid = np.concatenate(parts, 1)
    tokens, position = _compact(grid)
    proof_start = 1 + facts.shape[1] * _FACT + question.shape[1]
    slot_cols = proof_start + np.arange(S) * _FACT + (_FACT - 1)
    valid = np.arange(S)[None] < n_steps[:, None]
    slots = np.where(valid, position[:, slot_cols], -1)
    labels = np.where(valid, (~bad).astype(np.int64), -1)
    return {
        "tokens": torch.as_tensor(tokens),
        "slots": torch.as_tensor(slots),
        "labels": torch.as_tensor(labels),
        "n_steps": torch.as_tensor(n_steps),
        "answer": torch.as_tensor(positive.astype(np.int64)),
        "answer_pos": torch.as_tensor(position[:, grid.shape[1] - 2]),
        "loss_start": torch.as_tensor(position[:, proof_start]),
        "kind": torch.as_tensor(np.where(valid, kind, -1)),
    }


def problems(n: int, config: ProblemConfig, seed: int) -> dict[str, torch.Tensor]:
    """:func:`generate_problems`, cached (safetensors) by generator version, config, size and seed."""
    key = {"n": n, "seed": seed, **config.__dict__}
    return cached_tensors(
        "prontoqa", "problems", GENERATOR_VERSION, key, lambda: generate_problems(n, config, seed)
    )


def lm_rows(batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """``(input_ids, labels)`` for LM training: labels on the proof, its tags and the answer (-100 else)."""
    tokens = batch["tokens"]
    position = torch.arange(tokens.shape[1])[None]
    labels = tokens.masked_fill((position < batch["loss_start"][:, None]) | (tokens == PAD), -100)
    return tokens, labels


class ProntoQADataModule(GlobalBatchDataModule):
    """Tagged ProntoQA-style proofs for training the substrate LM: batches ``(input_ids, labels)``.

    Train, val and test draw disjoint seeds of the same :class:`ProblemConfig`; ``data_spec`` gives the
    vocabulary size and special ids the model is built from.
    """

    def __init__(
        self,
        train_size: int = 8000,
        eval_size: int = 500,
        depth_min: int = 2,
        depth_max: int = 4,
        split: str = "train",
        clean_fraction: float = 0.25,
        distractor_swap: float = 0.5,
        batch_size: int = 32,
        seed: int = 0,
        num_workers: int = 0,
    ) -> None:
        super().__init__(batch_size, num_workers)
        if train_size < 1 or eval_size < 1:
            raise ConfigError("data.train_size and data.eval_size must be positive")
        self.config = ProblemConfig(depth_min, depth_max, split, clean_fraction, distractor_swap)
        self.config.check()
        self.sizes = {"train": train_size, "val": eval_size, "test": eval_size}
        self.seed = seed
        self.sets: dict[str, TensorBatchDataset] = {}

    def data_spec(self) -> dict[str, Any]:
        """Vocabulary size, special ids and the longest row (what the LM is sized by)."""
        self.setup("fit")
        return {
            "vocab_size": len(VOCAB),
            "pad_token_id": PAD,
            "eos_token_id": EOS,
            "block_size": max(t.tensors[0].shape[1] for t in self.sets.values()),
        }

    def setup(self, stage: str | None = None) -> None:
        for offset, split in enumerate(("train", "val", "test")):
            if split not in self.sets:
                batch = problems(self.sizes[split], self.config, self.seed * 7919 + offset)
                self.sets[split] = TensorBatchDataset(*lm_rows(batch))

    def _loader(self, split: str, shuffle: bool) -> Any:
        self.setup()
        return batch_loader(
            self.sets[split], self.per_device_batch_size, shuffle, self.seed, self.num_workers
        )

    def train_dataloader(self) -> Any:
        return self._loader("train", True)

    def val_dataloader(self) -> Any:
        return self._loader("val", False)

    def test_dataloader(self) -> Any:
        return self._loader("test", False)
