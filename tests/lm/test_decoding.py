"""Step-wise decoding with cache reuse against full recomputation: appended chunks, right-padded chunks,
branching that leaves the parent intact, scores of candidate continuations, and beam search against an
exhaustive enumeration."""

from __future__ import annotations

import itertools
from collections.abc import Callable

import pytest
import torch
from transformers import PreTrainedModel

from litlab.lm.decoding import DecodeState, beam_search
from litlab.lm.generation import pad_sequences, token_logprobs
from litlab.lm.models import build_lm, llama_config


def _next_logprobs(model: PreTrainedModel, rows: list[list[int]]) -> torch.Tensor:
    """Reference: the next-token log-probs after each (unpadded) row, from a full forward pass."""
    with torch.no_grad():
        return torch.stack([model(input_ids=torch.tensor([r])).logits[0, -1].log_softmax(-1) for r in rows])


def test_appending_chunks_equals_a_full_forward(tiny_lm: Callable, gpt2_lm: PreTrainedModel) -> None:
    for model in (tiny_lm("causal", initializer_range=0.2), gpt2_lm):
        prompts = [[5, 17, 99, 230, 8], [44, 8]]
        ids, mask = pad_sequences(prompts, pad_id=1, side="left")
        state = DecodeState.prefill(model, ids, mask)
        assert torch.allclose(state.logprobs(), _next_logprobs(model, prompts), atol=1e-5)
        chunk, chunk_mask = torch.tensor([[7, 9, 11], [12, 13, 1]]), torch.tensor([[1, 1, 1], [1, 1, 0]])
        scores, after = state.score(chunk, chunk_mask)
        rows = [prompts[0] + [7, 9, 11], prompts[1] + [12, 13]]
        assert torch.allclose(after.logprobs(), _next_logprobs(model, rows), atol=1e-5)
        for row, full in enumerate(rows):
            reference = token_logprobs(model, torch.tensor([full])).detach()[0, -(2 + (row == 0)) :]
            assert torch.allclose(scores[row, : len(reference)], reference, atol=1e-5)
        assert scores[1, 2] == 0
        step = after.append(torch.tensor([3, 4]))  # one more token per row, on top of the padded chunk
        assert torch.allclose(
            step.logprobs(), _next_logprobs(model, [rows[0] + [3], rows[1] + [4]]), atol=1e-5
        )


def test_branches_share_the_prefix_and_leave_the_parent_intact(tiny_lm: Callable) -> None:
    model = tiny_lm("causal", initializer_range=0.2)
    parent = DecodeState.prefill(model, torch.tensor([[5, 17, 99]]))
    before = parent.logits.clone()
    branches = parent.select(torch.tensor([0, 0, 0])).append(torch.tensor([10, 20, 30]))
    deeper = branches.select(torch.tensor([2, 0])).append(torch.tensor([[40, 41], [50, 51]]))
    assert torch.equal(parent.logits, before) and parent.length == 3  # the parent can branch again
    assert parent.cache.get_seq_length() == 3 and branches.cache.get_seq_length() == 4
    again = parent.select(torch.tensor([0])).append(torch.tensor([30]))
    assert torch.allclose(again.logits, branches.logits[2:3], atol=1e-6)
    expected = _next_logprobs(model, [[5, 17, 99, 30, 40, 41], [5, 17, 99, 10, 50, 51]])
    assert torch.allclose(deeper.logprobs(), expected, atol=1e-5)


def test_beam_search_with_enough_beams_is_exhaustive() -> None:
    torch.manual_seed(0)
    vocab, steps = 6, 3
    model = build_lm(
        llama_config(vocab, hidden_size=16, num_layers=1, num_heads=2, initializer_range=0.5)
    ).eval()
    prompt = torch.tensor([[1, 4, 2]])
    sequences, scores = beam_search(model, prompt, num_beams=vocab ** (steps - 1), max_new_tokens=steps)
    candidates = torch.tensor(list(itertools.product(range(vocab), repeat=steps)))
    full = torch.cat([prompt.expand(len(candidates), 3), candidates], 1)
    with torch.no_grad():
        totals = token_logprobs(model, full)[:, -steps:].sum(1)
    best = totals.topk(vocab ** (steps - 1))
    assert torch.allclose(scores[0], best.values, atol=1e-5)
    assert torch.equal(sequences[0, 0], full[best.indices[0]])
    greedy, _ = beam_search(model, prompt, num_beams=1, max_new_tokens=steps)
    x = prompt
    with torch.no_grad():
        for _ in range(steps):
            x = torch.cat([x, model(input_ids=x).logits[:, -1].argmax(-1, keepdim=True)], 1)
    assert torch.equal(greedy[0, 0], x[0])


def test_beam_search_keeps_finished_beams(tiny_lm: Callable) -> None:
    model = tiny_lm("causal", initializer_range=0.3)
    prompt = torch.tensor([[5, 17, 99]])
    free, _ = beam_search(model, prompt, num_beams=4, max_new_tokens=5)
    eos = int(free[0, 0, 4])  # the best beam's second new token becomes EOS
    sequences, scores = beam_search(
        model, prompt, num_beams=4, max_new_tokens=5, eos_token_id=eos, pad_token_id=1
    )
    ended = (sequences[:, :, 3:] == eos).any(-1)
    assert ended.any() and (scores[0, :-1] >= scores[0, 1:]).all()
    for beam in range(4):
        row = sequences[0, beam, 3:].tolist()
        length = row.index(eos) + 1 if eos in row else len(row)
        assert all(t == 1 for t in row[length:])  # padded after its end, at no cost
        with torch.no_grad():
            total = token_logprobs(model, sequences[0, beam : beam + 1, : 3 + length])[0, 2:].sum()
        assert float(total) == pytest.approx(float(scores[0, beam]), abs=1e-4)
