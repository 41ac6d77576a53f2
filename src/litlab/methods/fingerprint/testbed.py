"""The CI-sized lineage testbed on litlab's tiny LMs: independent base models, children derived from each
(post-training, pruning with healing, vocabulary extension, pure manipulations) and negatives, all written
as ``save_pretrained`` folders beside a ``pairs.csv`` that the evaluation reads (and users extend).

Bases differ by seed, by corpus half (each half trains its own BPE, so vocabularies only partly overlap) and
by width. Models are cached under ``<cache>/fingerprint/<digest of the config>/``; a finished model folder
is never rebuilt.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_file
from torch.utils.data import DataLoader

from litlab.core.errors import ConfigError
from litlab.core.paths import cache_dir
from litlab.core.progress import track
from litlab.datamodules.text import procedural_documents, text_file
from litlab.datamodules.tokenizers import cached_bpe
from litlab.fitting import Fitter
from litlab.lm.models import load_pretrained
from litlab.lm.module import LanguageModel
from litlab.methods.fingerprint import derive, posttrain

VERSION = "1"
POSITIVES = (
    "sft",
    "continued",
    "width_prune",
    "depth_prune",
    "head_prune",
    "vocab_ext",
    "permute_hidden",
    "scale_qk",
    "rotate_heads",
    "permute_heads",
    "rl",
    "projector",
    "moe_upcycle",
)
TRAINED = {"sft", "continued", "width_prune", "depth_prune", "head_prune", "vocab_ext", "moe_upcycle"}
PAIR_FIELDS = ("first", "second", "label", "category")


@dataclass(frozen=True)
class Spec:
    """The testbed's sizes: architecture, corpus slice, training lengths (AdamW, constant lr)."""

    hidden: int = 64
    layers: int = 4
    heads: int = 4
    vocab_size: int = 384
    corpus_bytes: int = 120_000
    block_size: int = 32
    batch_size: int = 8
    base_steps: int = 100
    child_steps: int = 30
    lr: float = 3e-3


def _corpus(half: str, n_bytes: int) -> str:
    """The first ``n_bytes`` of half 'a' or 'b' of tinyshakespeare, cut at a line break."""
    text = text_file("tinyshakespeare").read_text(encoding="utf-8")
    middle = text.index("\n", len(text) // 2) + 1
    part = text[:middle] if half == "a" else text[middle:]
    return part[: part.rfind("\n", 0, n_bytes) + 1]


def _sft_corpus(n_bytes: int, seed: int) -> str:
    """Another domain for SFT: procedural entity descriptions (seeded)."""
    docs = procedural_documents("entities", max(20, n_bytes // 400), seed)
    return "\n\n".join(docs)[:n_bytes]


def _blocks(tokenizer: Any, text: str, block_size: int) -> torch.Tensor:
    """``(n, block_size)`` consecutive blocks of ``text``'s tokens."""
    ids = torch.tensor(tokenizer(text, add_special_tokens=False)["input_ids"], dtype=torch.long)
    n = len(ids) // block_size
    return ids[: n * block_size].view(n, block_size)


def _loader(blocks: torch.Tensor, batch_size: int, seed: int) -> DataLoader:
    def collate(index: list[int]) -> dict[str, torch.Tensor]:
        rows = blocks[torch.tensor(index)]
        return {"input_ids": rows, "labels": rows.clone()}

    generator = torch.Generator().manual_seed(seed)
    return DataLoader(range(len(blocks)), batch_size, shuffle=True, collate_fn=collate, generator=generator)


def _publish(folder: Path, write: Callable[[Path], None]) -> Path:
    """Write a model folder through a temporary sibling and rename it (a half-written model is never used)."""
    if (folder / "config.json").is_file():
        return folder
    tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", dir=folder.parent))
    try:
        write(tmp)
        os.replace(tmp, folder)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return folder


class Builder:
    """Makes the testbed's model folders under ``root`` (training through ``fitter``)."""

    def __init__(self, fitter: Fitter, spec: Spec, root: Path) -> None:
        self.fitter, self.spec, self.root = fitter, spec, root
        (root / "models").mkdir(parents=True, exist_ok=True)

    def folder(self, name: str) -> Path:
        return self.root / "models" / name

    def _fit(self, module: Any, text: str, steps: int, seed: int, out: Path) -> None:
        blocks = _blocks(module.tokenizer, text, self.spec.block_size)
        self.fitter.fit(module, _loader(blocks, self.spec.batch_size, seed), max_steps=steps, seed=seed)
        module.export(out)

    def _module(self, **kwargs: Any) -> Any:
        optimizer = partial(torch.optim.AdamW, lr=self.spec.lr, weight_decay=0.0)
        return LanguageModel(optimizer, **kwargs)

    def base(self, name: str, seed: int, corpus: str, hidden: int | None) -> Path:
        """A base LM trained from scratch on corpus half ``corpus`` with its own BPE."""
        spec = self.spec
        text = _corpus(corpus, spec.corpus_bytes)

        def write(out: Path) -> None:
            arch = {"hidden_size": hidden or spec.hidden, "num_layers": spec.layers, "num_heads": spec.heads}
            module = self._module(arch={**arch, "max_position_embeddings": spec.block_size})
            torch.manual_seed(seed)
            module.build(cached_bpe([text], spec.vocab_size))
            self._fit(module, text, spec.base_steps, seed, out)

        return _publish(self.folder(name), write)

    def child(self, category: str, parent: Path, corpus: str, seed: int) -> Path:
        """``category`` derived from the model in ``parent`` (trained with ``child_steps`` if it heals)."""
        spec = self.spec
        g = torch.Generator().manual_seed(seed)

        def write(out: Path) -> None:
            model, tokenizer = load_pretrained(parent)
            edits: dict[str, Callable[[], Any]] = {
                "width_prune": lambda: derive.prune_width(model, derive.width_keep(model, 0.75)),
                "depth_prune": lambda: derive.prune_depth(model, [model.config.num_hidden_layers // 2]),
                "head_prune": lambda: derive.prune_heads(
                    model, torch.arange(model.config.num_key_value_heads // 2)
                ),
                "vocab_ext": lambda: derive.extend_vocab(model, 64),
                "permute_hidden": lambda: derive.permute_hidden(model, g)[0],
                "scale_qk": lambda: derive.scale_qk(model, 4.0),
                "rotate_heads": lambda: derive.rotate_heads(model, g),
                "permute_heads": lambda: derive.permute_heads(model, g),
                "moe_upcycle": lambda: derive.upcycle_moe(model, g),
            }
            if category in ("rl", "projector"):
                self._post_train(category, model, tokenizer, g, out)
                return
            if category == "vocab_ext":
                tokenizer.add_tokens([f"<|new_{i}|>" for i in range(64)])
            edited = edits[category]() if category in edits else model
            if category not in TRAINED:
                edited.save_pretrained(out)
                tokenizer.save_pretrained(out)
                return
            with tempfile.TemporaryDirectory(dir=self.root) as start:
                edited.save_pretrained(start)
                tokenizer.save_pretrained(start)
                module = self._module(pretrained_path=start)
            other = "b" if corpus == "a" else "a"
            text, steps = {
                "sft": (_sft_corpus(spec.corpus_bytes // 2, seed), spec.child_steps),
                "continued": (_corpus(other, spec.corpus_bytes), 2 * spec.child_steps),
            }.get(category, (_corpus(corpus, spec.corpus_bytes), spec.child_steps))
            self._fit(module, text, steps, seed, out)

        return _publish(self.folder(f"{parent.name}-{category}"), write)

    def _post_train(self, category: str, model: Any, tokenizer: Any, g: torch.Generator, out: Path) -> None:
        """RL: ``child_steps`` of SFT on solved additions (so digits are reachable), then ``2·child_steps``
        REINFORCE steps; projector: ``child_steps`` projector-only, then ``child_steps`` joint steps. The
        training log goes to ``posttrain.json``."""
        steps = self.spec.child_steps
        if category == "rl":
            with (
                tempfile.TemporaryDirectory(dir=self.root) as start,
                tempfile.TemporaryDirectory(dir=self.root) as warm,
            ):
                model.save_pretrained(start)
                tokenizer.save_pretrained(start)
                text = posttrain.arithmetic_text(4000, g)
                self._fit(self._module(pretrained_path=start), text, steps, int(g.initial_seed()), Path(warm))
                model, tokenizer = load_pretrained(warm)
            log = {"reward": posttrain.reinforce(model, tokenizer, 2 * steps, g)}
        else:
            proj, _, losses = posttrain.train_projector(model, tokenizer, steps, g)

            out.mkdir(parents=True, exist_ok=True)
            save_file(
                {k: v.contiguous() for k, v in proj.state_dict().items()}, out / "projector.safetensors"
            )
            log = {"caption_loss": losses}
        model.save_pretrained(out)
        tokenizer.save_pretrained(out)
        (out / "posttrain.json").write_text(json.dumps(log))

    def gaussian(self, parent: Path, seed: int) -> Path:
        """Gaussian weights with ``parent``'s per-matrix mean and std (and its tokenizer)."""

        def write(out: Path) -> None:
            model, tokenizer = load_pretrained(parent)
            derive.gaussian_like(model, torch.Generator().manual_seed(seed)).save_pretrained(out)
            tokenizer.save_pretrained(out)

        return _publish(self.folder(f"{parent.name}-gaussian"), write)


def build_testbed(
    fitter: Fitter,
    bases: Sequence[dict[str, Any]],
    spec: Spec | None = None,
    categories: Sequence[str] = POSITIVES,
    root: str | os.PathLike | None = None,
) -> Path:
    """Build (or reuse) every model and write ``pairs.csv`` (first, second, label, category; paths relative
    to the file). ``bases``: dicts with ``seed``, ``corpus`` ('a'/'b'), optional ``hidden``."""
    unknown = sorted(set(categories) - set(POSITIVES))
    if unknown:
        raise ConfigError(f"task.categories has unknown {unknown}; choose among {', '.join(POSITIVES)}")
    if len(bases) < 2:
        raise ConfigError(f"task.bases needs at least 2 base models for negatives, got {len(bases)}")
    spec = spec or Spec()
    key = {"version": VERSION, "spec": vars(spec)}
    folder = Path(root) if root is not None else cache_dir("fingerprint", key)
    builder = Builder(fitter, spec, folder)
    base_paths, children = [], {}
    for b in track(bases, "fingerprint: base models"):
        name = f"base-s{b['seed']}-{b['corpus']}" + (f"-d{b['hidden']}" if b.get("hidden") else "")
        base_paths.append(builder.base(name, int(b["seed"]), str(b["corpus"]), b.get("hidden")))
    pairs: list[tuple[Path, Path, int, str]] = []
    jobs = [(i, c) for i in range(len(bases)) for c in categories]
    for i, category in track(jobs, "fingerprint: derived models"):
        seed = 1000 + 97 * int(bases[i]["seed"]) + POSITIVES.index(category)
        child = builder.child(category, base_paths[i], str(bases[i]["corpus"]), seed)
        children[i, category] = child
        pairs.append((base_paths[i], child, 1, category))
    for i in range(len(bases)):
        for j in range(i + 1, len(bases)):
            pairs.append((base_paths[i], base_paths[j], 0, "neg_base_pair"))
        pairs.append((base_paths[i], builder.gaussian(base_paths[i], 7 + i), 0, "neg_gaussian"))
        for category in ("sft", "continued"):  # hard negatives: a post-trained child of A against base B
            if (i, category) in children:
                other = base_paths[(i + 1) % len(bases)]
                pairs.append((children[i, category], other, 0, "neg_hard"))
    path = folder / "pairs.csv"
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(PAIR_FIELDS)
        writer.writerows((a.relative_to(folder), b.relative_to(folder), y, c) for a, b, y, c in pairs)
    return path
