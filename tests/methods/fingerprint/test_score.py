"""The AWM score on exact manipulations, planted permutations, pruning maps, depth matching and negatives."""

from __future__ import annotations

import pytest
import torch

from litlab.lm import build_lm, llama_config
from litlab.methods.fingerprint import derive
from litlab.methods.fingerprint.align import align_hidden, shared_rows
from litlab.methods.fingerprint.score import Options, awm_score, z_score
from litlab.methods.fingerprint.weights import from_model

VOCAB = {f"t{i}": i for i in range(300)}


def _model(seed: int, hidden: int = 64, layers: int = 3):
    torch.manual_seed(seed)
    return build_lm(llama_config(300, hidden, layers, 4, initializer_range=0.05)).eval()


@pytest.fixture(scope="module")
def base():
    return _model(0)


@pytest.mark.parametrize("manipulation", ["permute_hidden", "scale_qk", "rotate_heads", "permute_heads"])
def test_pure_manipulations_keep_the_function_and_score_one(base, manipulation: str) -> None:
    g = torch.Generator().manual_seed(5)
    if manipulation == "permute_hidden":
        derived = derive.permute_hidden(base, g)[0]
    elif manipulation == "scale_qk":
        derived = derive.scale_qk(base, 7.5)
    else:
        derived = getattr(derive, manipulation)(base, g)
    x = torch.randint(0, 300, (2, 12), generator=g)
    torch.testing.assert_close(derived.eval()(x).logits, base(x).logits, atol=1e-4, rtol=1e-4)
    result = awm_score(from_model(base, VOCAB), from_model(derived, VOCAB))
    assert result.score == pytest.approx(1.0, abs=1e-5)
    assert result.z == pytest.approx(z_score(1.0))


def test_assignment_recovers_a_planted_permutation_and_signs(base) -> None:
    derived, perm, signs = derive.permute_hidden(base, torch.Generator().manual_seed(7))
    alignment = awm_score(from_model(base, VOCAB), from_model(derived, VOCAB)).alignment
    assert torch.equal(alignment.index, perm)
    assert torch.equal(alignment.sign, signs)


def test_shuffled_vocabulary_ids_are_matched_by_string(base) -> None:
    """A target whose token ids are reordered still aligns: rows are matched by token string."""
    order = torch.randperm(300, generator=torch.Generator().manual_seed(8))
    embed = base.get_input_embeddings().weight.detach()
    target_vocab = {f"t{int(old)}": new for new, old in enumerate(order)}
    rows_base, rows_target = shared_rows(VOCAB, target_vocab)
    alignment = align_hidden(embed[rows_base], embed[order][rows_target])
    assert torch.equal(alignment.index, torch.arange(64))


def test_width_pruned_dimensions_map_to_their_originals(base) -> None:
    keep = derive.width_keep(base, 0.75)
    pruned = derive.prune_width(base, keep)
    assert pruned.config.hidden_size == 48
    for first, second in ((base, pruned), (pruned, base)):  # symmetric: the wider model is the base
        result = awm_score(from_model(first, VOCAB), from_model(second, VOCAB))
        assert torch.equal(result.alignment.index, keep)
        assert result.score == pytest.approx(1.0, abs=1e-5)


def test_depth_pruning_is_matched_by_layer_assignment(base) -> None:
    pruned = derive.prune_depth(base, [1])
    result = awm_score(from_model(base, VOCAB), from_model(pruned, VOCAB))
    assert result.layer_pairs == [(0, 0), (2, 1)]
    assert result.score == pytest.approx(1.0, abs=1e-5)
    ablated = awm_score(from_model(base, VOCAB), from_model(pruned, VOCAB), Options(layer_matching=False))
    assert ablated.layer_pairs == [(0, 0), (1, 1)]
    assert ablated.score < 0.8
    swapped = awm_score(from_model(pruned, VOCAB), from_model(base, VOCAB))
    assert swapped.layer_pairs == [(0, 0), (1, 2)]


def test_independent_and_gaussian_models_score_near_zero(base) -> None:
    other = _model(1)
    gaussian = derive.gaussian_like(base, torch.Generator().manual_seed(9))
    for negative in (other, gaussian):
        assert abs(awm_score(from_model(base, VOCAB), from_model(negative, VOCAB)).score) < 0.05
    biased = awm_score(from_model(base, VOCAB), from_model(other, VOCAB), Options(unbiased=False)).score
    assert biased > 0.3  # biased CKA inflates unrelated pairs


def test_ablations_break_the_manipulation_each_step_undoes(base) -> None:
    derived, _, _ = derive.permute_hidden(base, torch.Generator().manual_seed(10))
    pair = from_model(base, VOCAB), from_model(derived, VOCAB)
    assert awm_score(*pair, Options(assignment=False)).score < 0.2
    assert awm_score(*pair, Options(sign=False)).score < 0.2


def test_head_pruning_and_vocabulary_extension_stay_related(base) -> None:
    heads = derive.prune_heads(base, torch.tensor([0, 3]))
    assert heads.config.num_attention_heads == 2
    extended = derive.extend_vocab(base, 20)
    vocab = {**VOCAB, **{f"new{i}": 300 + i for i in range(20)}}
    assert awm_score(from_model(base, VOCAB), from_model(heads, VOCAB)).score > 0.5
    result = awm_score(from_model(base, VOCAB), from_model(extended, vocab))
    assert result.shared_tokens == 300
    assert result.score == pytest.approx(1.0, abs=1e-5)
