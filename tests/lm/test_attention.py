"""Block-sparse attention masks: equal to dense attention when every block is kept, equal to an eager
reference with the same per-head mask written as an additive 4-D mask (also with grouped-query heads and
one mask per layer), gradients that never reach blocked keys in training, batches carrying a mask through
the LightningModule, the same mask through KV-cached decoding, and the kernel hook."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import lightning as L
import pytest
import torch
from torch.utils.data import DataLoader
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from litlab.core.errors import LitlabError
from litlab.lm.attention import BlockMask, causal_mask, reference_block_attention, use_block_attention
from litlab.lm.generation import sample
from litlab.lm.losses import causal_nll_terms
from litlab.lm.models import build_lm, llama_config
from litlab.lm.module import LanguageModel


def _random_mask(heads: int, blocks: int, seed: int) -> torch.Tensor:
    """A random per-head block pattern that always keeps each query block's own (diagonal) block."""
    keep = torch.rand(1, heads, blocks, blocks, generator=torch.Generator().manual_seed(seed)) < 0.5
    return keep | torch.eye(blocks, dtype=torch.bool)


def _eager_twin(model: PreTrainedModel) -> PreTrainedModel:
    """The same weights under transformers' eager attention (which takes a 4-D additive mask as is)."""
    config = model.config.__class__.from_dict(model.config.to_dict())
    twin = type(model)(config)
    twin.load_state_dict(model.state_dict())
    twin.set_attn_implementation("eager")
    return twin.eval()


def _additive(allowed: torch.Tensor) -> torch.Tensor:
    return torch.zeros(allowed.shape).masked_fill(~allowed, torch.finfo(torch.float32).min)


@pytest.mark.parametrize("objective", ["causal", "masked_diffusion"])
def test_keeping_every_block_is_dense_attention(tiny_lm: Callable, objective: str) -> None:
    model = tiny_lm(objective, initializer_range=0.2)
    x = torch.randint(3, 600, (2, 20), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        dense = model(input_ids=x).logits
        use_block_attention(model)
        assert torch.allclose(model(input_ids=x).logits, dense, atol=1e-5)  # no mask: the usual path
        full = BlockMask.full(20, block_size=8, heads=4)
        assert torch.allclose(model(input_ids=x, block_mask=full).logits, dense, atol=1e-5)


@pytest.mark.parametrize(("objective", "kv_heads"), [("causal", 4), ("causal", 2), ("masked_diffusion", 4)])
def test_per_head_block_mask_equals_an_eager_reference(
    tiny_lm: Callable, objective: str, kv_heads: int
) -> None:
    model = tiny_lm(objective, initializer_range=0.2, num_kv_heads=kv_heads)
    eager = _eager_twin(model)
    length, block = 24, 4
    masks = [BlockMask(_random_mask(4, 6, seed), block) for seed in (1, 2)]  # one pattern per layer
    x = torch.randint(3, 600, (2, length), generator=torch.Generator().manual_seed(3))
    use_block_attention(model)
    allowed = masks[0].dense(length, length)
    if objective == "causal":
        allowed = allowed & causal_mask(length, length, x.device)
    with torch.no_grad():  # eager takes one mask for every layer: compare with the same pattern in both
        reference = eager(input_ids=x, attention_mask=_additive(allowed).expand(2, -1, -1, -1)).logits
        same = model(input_ids=x, block_mask=masks[0]).logits
        per_layer = model(input_ids=x, block_mask=masks).logits
    assert torch.allclose(same, reference, atol=1e-4)
    assert not torch.allclose(per_layer, same, atol=1e-3)  # the second layer's own pattern is used


def test_gradients_never_reach_blocked_keys_in_training(tokenizer: object) -> None:
    torch.manual_seed(0)
    config = llama_config(600, hidden_size=32, num_layers=1, num_heads=4, tie_word_embeddings=False)
    model = use_block_attention(build_lm(config))
    early, late = torch.arange(10, 18), torch.arange(100, 108)  # tokens only in block 0, only in block 1
    ids = torch.cat([early, late])[None]
    labels = torch.cat([torch.full((9,), -100), late[1:]])[None]  # predicted from positions 8..14 only
    pattern = torch.ones(1, 4, 2, 2, dtype=torch.bool)
    pattern[0, :, 1, 0] = False  # block 1 never sees block 0, in every head
    for block_mask, reached in ((None, True), (BlockMask(pattern, 8), False)):
        model.zero_grad()
        batch = {"input_ids": ids, "labels": labels, "block_mask": block_mask}
        causal_nll_terms(model, batch, torch.ones(600, dtype=torch.long)).nll.backward()
        grad = model.model.embed_tokens.weight.grad
        assert bool(grad[early].abs().sum() > 0) == reached
        assert grad[late].abs().sum() > 0


def test_the_module_trains_and_validates_on_batches_with_a_block_mask(
    tokenizer: PreTrainedTokenizerBase, tmp_path: Path
) -> None:
    """``LanguageModel(block_attention=True)`` under a Lightning Trainer, which moves every batch (its
    ``block_mask`` included) to the device: the validation loss is the masked model's."""
    torch.manual_seed(0)
    arch = {"hidden_size": 32, "num_layers": 1, "num_heads": 4}
    module = LanguageModel(lambda params: torch.optim.AdamW(params, lr=1e-3), arch=arch, block_attention=True)
    module.build(tokenizer)
    ids = torch.randint(3, len(tokenizer), (4, 16), generator=torch.Generator().manual_seed(0))
    batch = {"input_ids": ids, "labels": ids.clone(), "block_mask": BlockMask(_random_mask(4, 4, 7), 4)}
    quiet = {"logger": False, "enable_progress_bar": False, "enable_model_summary": False}
    trainer = L.Trainer(max_steps=2, accelerator="cpu", enable_checkpointing=False, default_root_dir=tmp_path,
                        num_sanity_val_steps=0, **quiet)  # fmt: skip
    trainer.fit(module, train_dataloaders=DataLoader([batch, batch], batch_size=None))
    metrics = trainer.validate(module, dataloaders=DataLoader([batch], batch_size=None), verbose=False)[0]
    with torch.no_grad():
        masked, dense = (
            causal_nll_terms(module.lm, {**batch, "block_mask": m}, module.token_bytes)
            for m in (batch["block_mask"], None)
        )
    assert metrics["val/loss"] == pytest.approx(float(masked.nll / masked.tokens), rel=1e-5)
    assert metrics["val/loss"] != pytest.approx(float(dense.nll / dense.tokens), rel=1e-3)


def test_block_mask_holds_through_kv_cached_decoding(tiny_lm: Callable) -> None:
    model = use_block_attention(tiny_lm("causal", initializer_range=0.3))
    pattern = BlockMask(_random_mask(4, 4, seed=5), block_size=4)
    prompt = torch.tensor([[5, 17, 99, 230, 8, 40]])
    out = sample(model, prompt, max_new_tokens=9, temperature=0.0, block_mask=pattern).sequences
    x = prompt
    with torch.no_grad():
        for _ in range(9):
            logits = model(input_ids=x, block_mask=pattern).logits[:, -1]
            x = torch.cat([x, logits.argmax(-1, keepdim=True)], 1)
    assert torch.equal(out, x)
    dense = sample(model, prompt, max_new_tokens=9, temperature=0.0).sequences
    assert not torch.equal(out, dense)


def test_a_kernel_plugs_in_and_bad_masks_are_refused(tiny_lm: Callable) -> None:
    calls = []

    def kernel(*args: object) -> torch.Tensor:
        calls.append(args[3])
        return reference_block_attention(*args)

    model = use_block_attention(tiny_lm("causal"), kernel=kernel)
    mask = BlockMask.full(8, 4, heads=4)
    model(input_ids=torch.zeros(1, 8, dtype=torch.long), block_mask=mask)
    assert calls == [mask, mask]  # once per layer
    with pytest.raises(LitlabError, match="bool tensor"):
        BlockMask(torch.ones(1, 1, 2, 2), 4)
    with pytest.raises(LitlabError, match="too few"):
        model(input_ids=torch.zeros(1, 12, dtype=torch.long), block_mask=mask)
