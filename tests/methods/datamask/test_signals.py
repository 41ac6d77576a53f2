"""LM-based signals: the selector's input contract, and a fluent document outscoring noise."""

import torch

from litlab.datamodules.tokenizers import cached_bpe
from litlab.lm.models import build_lm, llama_config
from litlab.methods.datamask.signals import lm_signals, quality_from_bpb, unit_centred


def test_quality_from_bpb_is_monotone_and_half_at_the_median():
    bpb = torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0])
    quality = quality_from_bpb(bpb)
    assert (quality.diff() < 0).all() and abs(quality[2].item() - 0.5) < 1e-6


def test_unit_centred_rows():
    out = unit_centred(torch.randn(20, 6) + 5)
    torch.testing.assert_close(out.norm(dim=1), torch.ones(20))


def test_lm_signals_shapes_and_ranges(tmp_path):
    torch.manual_seed(0)
    texts = ["the cat sat on the mat. " * 4, "a dog ran in the park. " * 4, "qzx vvk pqo wrr " * 5]
    tokenizer = cached_bpe(texts * 3, 300, tmp_path)
    ids = {"eos_token_id": tokenizer.eos_token_id, "pad_token_id": tokenizer.pad_token_id}
    config = llama_config(len(tokenizer), hidden_size=32, num_layers=1, num_heads=2, **ids)
    quality, embeddings = lm_signals(build_lm(config).eval(), tokenizer, texts, window=32)
    assert quality.shape == (3,) and ((quality > 0) & (quality < 1)).all()
    assert embeddings.shape == (3, 32)
    torch.testing.assert_close(embeddings.norm(dim=1), torch.ones(3))
