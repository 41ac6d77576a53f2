"""Causal and masked-diffusion LLaMAs: attention direction, a diffusion model refusing the causal labels=
loss, and save_pretrained → pretrained_path round trips (ours and another HF architecture)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedModel, PreTrainedTokenizerBase

from litlab.core.errors import LitlabError
from litlab.lm.models import LlamaForMaskedDiffusion, load_pretrained
from litlab.lm.module import LanguageModel


def _optimizer(params: object) -> torch.optim.Optimizer:
    return torch.optim.AdamW(params, lr=1e-3)


@pytest.mark.parametrize("attn", ["sdpa", "eager"])
def test_diffusion_attends_to_later_tokens_and_causal_does_not(tiny_lm: Callable, attn: str) -> None:
    x = torch.randint(3, 600, (2, 12), generator=torch.Generator().manual_seed(0))
    y = x.clone()
    y[:, -1] = (y[:, -1] + 1 - 3) % 597 + 3  # change only the last token
    causal, diffusion = (
        tiny_lm("causal", attn_implementation=attn),
        tiny_lm("masked_diffusion", attn_implementation=attn),
    )
    with torch.no_grad():
        assert torch.equal(causal(input_ids=x).logits[:, :-1], causal(input_ids=y).logits[:, :-1])
        change = (diffusion(input_ids=x).logits - diffusion(input_ids=y).logits)[:, :-1].abs().amax(-1)
    assert (change > 1e-6).all(), "every earlier position of the diffusion model must see the last token"
    assert isinstance(diffusion, LlamaForMaskedDiffusion) and diffusion.config.is_causal is False


def _module(tokenizer: PreTrainedTokenizerBase, objective: str, **kwargs: object) -> LanguageModel:
    module = LanguageModel(
        _optimizer, objective=objective, arch={"hidden_size": 32, "num_layers": 2}, **kwargs
    )
    if module.lm is None:
        torch.manual_seed(0)
        module.build(tokenizer)
    return module.eval()


def test_diffusion_model_refuses_the_shifted_causal_labels_loss(tiny_lm: Callable) -> None:
    """The issue's defect: transformers' labels= loss is next-token CE, meaningless for masked diffusion."""
    model, x = tiny_lm("masked_diffusion"), torch.randint(3, 600, (1, 8))
    with pytest.raises(LitlabError, match="no labels= loss"):
        model(input_ids=x, labels=x)
    assert model(input_ids=x).logits.shape == (1, 8, 600)


@pytest.mark.parametrize("objective", ["causal", "masked_diffusion"])
def test_export_then_pretrained_path_gives_identical_logits(
    tokenizer: PreTrainedTokenizerBase, tmp_path: Path, objective: str
) -> None:
    module = _module(tokenizer, objective)
    with torch.no_grad():  # make the weights differ from any fresh initialisation
        for parameter in module.parameters():
            parameter.add_(0.01 * torch.randn_like(parameter))
    module.export(tmp_path)
    loaded = _module(tokenizer, objective, pretrained_path=str(tmp_path))
    x = torch.randint(0, len(tokenizer), (2, 16), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        assert torch.equal(module(x), loaded(x))
    assert torch.equal(module.token_bytes, loaded.token_bytes)
    assert type(loaded.lm) is type(module.lm)
    model, reloaded_tokenizer = load_pretrained(tmp_path)
    assert reloaded_tokenizer.get_vocab() == tokenizer.get_vocab()


def test_any_local_hf_causal_checkpoint_loads(tokenizer: PreTrainedTokenizerBase, tmp_path: Path) -> None:
    torch.manual_seed(0)
    gpt2 = GPT2LMHeadModel(
        GPT2Config(vocab_size=len(tokenizer), n_embd=32, n_layer=1, n_head=2, n_positions=64)
    )
    gpt2.eval().save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    module = _module(tokenizer, "causal", pretrained_path=str(tmp_path))
    x = torch.randint(0, len(tokenizer), (1, 10))
    with torch.no_grad():
        assert torch.equal(module(x), gpt2(input_ids=x).logits)


def test_objective_mismatch_and_missing_checkpoint_are_clear_errors(
    tokenizer: PreTrainedTokenizerBase, tmp_path: Path
) -> None:
    _module(tokenizer, "causal").export(tmp_path)
    with pytest.raises(LitlabError, match="causal model but model.objective=masked_diffusion"):
        _module(tokenizer, "masked_diffusion", pretrained_path=str(tmp_path))
    with pytest.raises(LitlabError, match="no config.json"):
        load_pretrained(tmp_path / "missing")


def test_logits_have_the_vocabulary_of_the_tokenizer(
    tiny_lm: Callable, tokenizer: PreTrainedTokenizerBase
) -> None:
    model: PreTrainedModel = tiny_lm("causal")
    assert model(input_ids=torch.zeros(1, 3, dtype=torch.long)).logits.shape == (1, 3, len(tokenizer))
    assert model.config.tie_word_embeddings and model.lm_head.weight is model.model.embed_tokens.weight
