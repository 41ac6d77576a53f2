"""Any local Hugging Face causal LM as the VS scorer: loading with one-line errors, and the problems
re-encoded in its tokenizer.

The generator writes words of a closed vocabulary; a foreign model reads the same text in its own
tokens. Each word becomes the tokenizer's encoding of ``" " + word`` (what a byte-level BPE or a
SentencePiece pre-tokeniser does to a space-separated word anyway), ``<eos>`` its BOS (else EOS) token,
and each tag one token of the model's vocabulary (``tags``: true, false, unknown; single tokens, so that
every assignment of a chain keeps its length and positions). The reward then scores the tag tokens and
every token of ``answer y*``. Vectorised: a per-word token table and one scatter per batch.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from torch import nn

from litlab.core.errors import LitlabError
from litlab.datamodules.prontoqa import EOS, PAD, TAGS, VOCAB
from litlab.lm.models import load_pretrained, require_causal
from litlab.methods.veracity.scoring import Batch

DEFAULT_TAGS = (" yes", " no", " unknown")  # one token each in GPT-2's vocabulary; set others as needed


def load_scorer(path: str | Path) -> tuple[nn.Module, Any]:
    """The causal LM and tokenizer of the local folder ``path`` in eval mode; a LitlabError when the folder
    is missing, cannot be loaded as a causal LM, or its predictions look ahead (a bidirectional model)."""
    where = Path(path).expanduser()
    if not (where / "config.json").is_file():
        raise LitlabError(f"task.scorer_path={path}: no config.json there; give a save_pretrained folder")
    try:
        model, tokenizer = load_pretrained(where)
    except LitlabError:
        raise
    except Exception as error:  # transformers raises ValueError/OSError/KeyError for foreign folders
        reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise LitlabError(f"task.scorer_path={path} is not a loadable causal LM: {reason}") from None
    require_causal(model, "Veracity Search")
    model.eval()
    _check_causal(model, path)
    return model, tokenizer


@torch.no_grad()
def _check_causal(model: nn.Module, path: str | Path) -> None:
    """Two inputs equal up to position 3: a causal LM's logits there must not depend on what follows."""
    vocab = int(model.get_input_embeddings().num_embeddings)
    generator = torch.Generator().manual_seed(0)
    a = torch.randint(vocab, (1, 8), generator=generator)
    b = torch.cat([a[:, :4], torch.randint(vocab, (1, 4), generator=generator)], 1)
    logits = model(input_ids=torch.cat([a, b])).logits[:, :4].float()
    if not torch.allclose(logits[0], logits[1], atol=1e-4, rtol=1e-4):
        raise LitlabError(f"task.scorer_path={path}: its predictions depend on later tokens (not causal)")


class Reencoder:
    """Maps closed-vocabulary problem batches to ``tokenizer``'s ids (``tokens``, ``slots``,
    ``answer_start``/``answer_pos`` and per-chain ``tag_ids``; labels and the rest unchanged)."""

    def __init__(self, tokenizer: Any, tags: tuple[str, str, str] | list[str] = DEFAULT_TAGS) -> None:
        if len(tags) != 3 or len(set(tags)) != 3:
            raise LitlabError(
                f"task.scorer_tags={list(tags)}: give three distinct strings (true/false/unknown)"
            )
        special = tokenizer.bos_token_id if tokenizer.bos_token_id is not None else tokenizer.eos_token_id
        pieces = []
        for index, word in enumerate(VOCAB):
            if index == EOS:
                pieces.append([] if special is None else [int(special)])
            elif index == PAD:
                pieces.append([])
            elif word in TAGS:
                text = tags[TAGS.index(word)]
                ids = tokenizer.encode(text, add_special_tokens=False)
                if len(ids) != 1:
                    raise LitlabError(
                        f"tag {text!r} is {len(ids)} tokens for this tokenizer; set task.scorer_tags to "
                        "three strings that are one token each"
                    )
                pieces.append(ids)
            else:
                pieces.append(tokenizer.encode(" " + word, add_special_tokens=False))
        width = max(len(p) for p in pieces)
        self.table = torch.tensor([p + [0] * (width - len(p)) for p in pieces])  # (V, width)
        self.lengths = torch.tensor([len(p) for p in pieces])
        self.tags = torch.tensor([pieces[VOCAB.index(word)][0] for word in TAGS])
        pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        self.pad = int(pad or 0)

    def __call__(self, batch: Batch) -> Batch:
        words = batch["tokens"]
        B, L = words.shape
        count = self.lengths[words]  # (B, L) tokens per word
        start = count.cumsum(1) - count  # first token of every word
        offset = torch.arange(self.table.shape[1])
        keep = offset < count[..., None]  # (B, L, width)
        out = torch.full((B, int(count.sum(1).max())), self.pad, dtype=torch.long)
        rows = torch.arange(B)[:, None, None].expand_as(keep)
        out[rows[keep], (start[..., None] + offset)[keep]] = self.table[words][keep]

        def at(position: torch.Tensor) -> torch.Tensor:
            return start.gather(1, position.clamp_min(0))

        answer = batch["answer_pos"][:, None]
        last = at(answer)[:, 0] + count.gather(1, answer)[:, 0] - 1
        return {
            **batch,
            "tokens": out,
            "slots": torch.where(batch["slots"] >= 0, at(batch["slots"]), -1),
            "answer_start": at(answer - 1)[:, 0],
            "answer_pos": last,
            "loss_start": at(batch["loss_start"][:, None])[:, 0],
            "tag_ids": self.tags.expand(B, 3).contiguous(),
        }
