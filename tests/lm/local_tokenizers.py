"""Tokenizers of the three families a byte count must handle, built locally with ``tokenizers`` (no hub):
SentencePiece-style BPE with byte fallback (Llama-2's layout), SentencePiece-style Unigram (Metaspace,
T5's layout) and WordPiece (BERT uncased, with its normaliser)."""

from __future__ import annotations

import json

from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

from litlab.datamodules.tokenizers import EOS_TOKEN, wrap_tokenizer

BYTE_TOKENS = [f"<0x{b:02X}>" for b in range(256)]


def sentencepiece_bpe(corpus: str, vocab_size: int = 500) -> PreTrainedTokenizerFast:
    """Llama-2's tokenizer.json layout: "▁" for spaces with a dummy prefix, byte fallback, BPE."""
    tokenizer = Tokenizer(models.BPE(byte_fallback=True, unk_token="<unk>", fuse_unk=True))
    tokenizer.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    tokenizer.pre_tokenizer = pre_tokenizers.Split("▁", "merged_with_next")
    tokenizer.decoder = decoders.Sequence(
        [decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(), decoders.Strip(" ", 1, 0)]
    )
    specials = [EOS_TOKEN, "<unk>", *BYTE_TOKENS]
    tokenizer.train_from_iterator(
        [corpus], trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=specials)
    )
    state = json.loads(tokenizer.to_str())  # byte tokens are ordinary vocabulary entries, as in Llama-2
    state["added_tokens"] = [t for t in state["added_tokens"] if t["content"] not in BYTE_TOKENS]
    return wrap_tokenizer(Tokenizer.from_str(json.dumps(state)))


def sentencepiece_unigram(corpus: str, vocab_size: int = 400) -> PreTrainedTokenizerFast:
    """T5-style: NFKC, Metaspace pre-tokeniser and decoder, Unigram model."""
    tokenizer = Tokenizer(models.Unigram())
    tokenizer.normalizer = normalizers.NFKC()
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace()
    tokenizer.decoder = decoders.Metaspace()
    trainer = trainers.UnigramTrainer(
        vocab_size=vocab_size, special_tokens=[EOS_TOKEN, "<unk>"], unk_token="<unk>"
    )
    tokenizer.train_from_iterator([corpus], trainer)
    return wrap_tokenizer(tokenizer)


def wordpiece(corpus: str, vocab_size: int = 400) -> PreTrainedTokenizerFast:
    """BERT uncased: lower-casing, accent-stripping normaliser, whitespace/punctuation split, "##" pieces."""
    tokenizer = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.BertNormalizer(lowercase=True)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tokenizer.decoder = decoders.WordPiece()
    trainer = trainers.WordPieceTrainer(vocab_size=vocab_size, special_tokens=[EOS_TOKEN, "[UNK]"])
    tokenizer.train_from_iterator([corpus], trainer)
    return wrap_tokenizer(tokenizer)
