"""SparseD decoding on a small random masked-diffusion LM: rho = 1 equals dense decoding, every kernel gives
the same tokens, the pattern is selected once (or every sparse step for the oracle arm) from dense steps,
and the selection step's logits are the dense ones."""

from __future__ import annotations

import warnings

import pytest
import torch
from transformers import PreTrainedModel

from litlab.core.errors import ConfigError
from litlab.lm import BlockMask, build_lm, llama_config
from litlab.methods.sparsed import attention as sparsed_attention
from litlab.methods.sparsed.attention import SelectMask, SparseDAttention
from litlab.methods.sparsed.decoding import generate, select_step


@pytest.fixture(scope="module")
def model() -> PreTrainedModel:
    torch.manual_seed(0)
    config = llama_config(
        40, hidden_size=32, num_layers=2, num_heads=2, mask_token_id=2, initializer_range=0.3
    )
    return build_lm(config, "masked_diffusion").eval()


@pytest.fixture(scope="module")
def prompts() -> torch.Tensor:
    return torch.randint(3, 40, (3, 48), generator=torch.Generator().manual_seed(1))


def test_select_step_counts_dense_steps() -> None:
    assert [select_step(16, s) for s in (0.0, 0.2, 0.5)] == [0, 3, 8]
    with pytest.raises(ConfigError):
        select_step(16, 1.0)


def test_full_budget_equals_dense(model: PreTrainedModel, prompts: torch.Tensor) -> None:
    dense = generate(model, prompts, 16, 8, attention="dense").sequences
    full = generate(model, prompts, 16, 8, s=0.2, rho=1.0, block=16)
    assert full.density == 1.0 and full.attention_cost == 1.0
    assert torch.equal(full.sequences, dense)


@pytest.mark.parametrize("kernel", ["reference", "flex"])
def test_kernels_decode_the_same_tokens(model: PreTrainedModel, prompts: torch.Tensor, kernel: str) -> None:
    gather = generate(model, prompts, 16, 8, rho=0.3, block=16)
    with warnings.catch_warnings():  # uncompiled flex_attention warns, once per process
        warnings.simplefilter("ignore", UserWarning)
        other = generate(model, prompts, 16, 8, rho=0.3, block=16, kernel=kernel)
    assert torch.equal(gather.sequences, other.sequences)
    assert 0 < gather.density < 1 and gather.attention_cost < 1


@pytest.mark.parametrize(("recompute", "expected"), [(False, 2), (True, 2 * 8)])
def test_pattern_is_selected_once_or_every_sparse_step(
    model: PreTrainedModel,
    prompts: torch.Tensor,
    monkeypatch: pytest.MonkeyPatch,
    recompute: bool,
    expected: int,
) -> None:
    calls = []
    original = SparseDAttention.select

    def counting(self, layer, query, key, scale):  # noqa: ANN001, ANN202
        calls.append(layer)
        return original(self, layer, query, key, scale)

    monkeypatch.setattr(sparsed_attention.SparseDAttention, "select", counting)
    generate(model, prompts, 16, 8, s=0.0, rho=0.3, block=16, recompute=recompute)
    assert len(calls) == expected  # 2 layers × (1 selection, or one per step from step 0 on)


def test_selection_step_attends_densely(model: PreTrainedModel, prompts: torch.Tensor) -> None:
    x = torch.cat([prompts, torch.full((3, 16), 2)], 1)
    dense = model(input_ids=x).logits
    controller = SparseDAttention(rho=0.3, block=16, gen_length=16)
    controller.attach(model)
    full = torch.ones(1, 1, 4, 4, dtype=torch.bool)
    selected = model(input_ids=x, block_mask=[SelectMask(full, 16) for _ in range(2)]).logits
    torch.testing.assert_close(selected, dense, atol=1e-5, rtol=0)
    assert sorted(controller.patterns) == [0, 1] and controller.patterns[0].shape == (3, 2, 4, 4)
    sparse = model(input_ids=x, block_mask=controller.masks(2)).logits
    reference = SparseDAttention(0.3, 16, 16, kernel="reference")
    reference.attach(model)
    expected = model(input_ids=x, block_mask=[BlockMask(p, 16) for p in controller.patterns.values()]).logits
    torch.testing.assert_close(sparse, expected, atol=1e-5, rtol=0)
    assert not torch.allclose(sparse, dense, atol=1e-3)


def test_bad_settings_fail_with_one_line(model: PreTrainedModel, prompts: torch.Tensor) -> None:
    with pytest.raises(ConfigError, match="attention"):
        generate(model, prompts, 16, 8, attention="window")
    with pytest.raises(ConfigError, match="kernel"):
        generate(model, prompts, 16, 8, kernel="cuda")
    with pytest.raises(ConfigError, match="rho"):
        generate(model, prompts, 16, 8, rho=1.5)
