"""The subset-case cover algorithm: exact against brute-force marginalisation, normalised, one teacher
forward per student token, and clear errors for pairs and prefixes it cannot score."""

from __future__ import annotations

import json

import pytest
import torch
from tokenizers import Tokenizer
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from litlab.core.errors import LitlabError
from litlab.datamodules.tokenizers import cached_bpe, subset_tokenizer, wrap_tokenizer
from litlab.methods.crosstok.brute import BruteForce
from litlab.methods.crosstok.cover import CrossTokenizerScorer
from litlab.methods.crosstok.pair import SubsetPair
from tests.lm.local_tokenizers import sentencepiece_bpe, sentencepiece_unigram

# Mid-word, at a word start, runs of spaces and newlines, contractions, digits, punctuation, empty.
PREFIXES = ["", "First Citiz", "the", " king", "O,  my l", "ROMEO:\nI'", "don't 12", "well;\n\n  an", "'re"]


def student_ids(pair: SubsetPair, text: str) -> list[int]:
    return pair.student.encode(text, add_special_tokens=False)


@pytest.mark.parametrize("n_merges", [0, 100])
@pytest.mark.parametrize("text", PREFIXES)
def test_cover_algorithm_equals_brute_force_marginalisation(
    pairs: dict[int, SubsetPair], teacher_lm: PreTrainedModel, n_merges: int, text: str
) -> None:
    pair = pairs[n_merges]
    ids = student_ids(pair, text)[-6:] if n_merges == 0 else student_ids(pair, text)  # bytes: short
    scorer, brute = CrossTokenizerScorer(teacher_lm, pair), BruteForce(teacher_lm, pair)
    expected, expected_prefix = brute.next_logprobs(ids)
    state = scorer.start()
    for s in ids:
        state = scorer.advance(state, s)
    incremental = scorer.next_logprobs(state)
    direct_state = scorer.state_for(ids)
    direct = scorer.next_logprobs(direct_state)
    for got in (incremental, direct):
        assert got.exp().sum().item() == pytest.approx(1.0, abs=1e-12)
        torch.testing.assert_close(got.exp(), expected.exp(), atol=1e-6, rtol=0)
    assert scorer.prefix_logprob(state) == pytest.approx(expected_prefix, abs=1e-5)
    assert scorer.prefix_logprob(direct_state) == pytest.approx(expected_prefix, abs=1e-5)


def test_mid_token_prefixes_have_straddling_covers(pairs: dict[int, SubsetPair], teacher_lm) -> None:
    """The brute-force comparison above is not trivial: mid-word prefixes mix both kinds of covers."""
    pair = pairs[100]
    scorer = CrossTokenizerScorer(teacher_lm, pair)
    state = scorer.state_for(student_ids(pair, "First Citiz"))
    assert len(state.token) > 0 and state.aligned is not None


def test_one_teacher_forward_per_student_token(pairs: dict[int, SubsetPair], teacher_lm) -> None:
    pair = pairs[100]
    ids = student_ids(pair, "First Citizen:\nBefore we proceed any further, hear me speak.")
    scorer = CrossTokenizerScorer(teacher_lm, pair)
    logps, _ = scorer.score_sequence(ids)
    assert scorer.teacher_calls == 1 + len(ids)  # BOS, then one forward per student token
    assert len(ids) > len(
        pair.teacher.encode("First Citizen:\nBefore we proceed any further, hear me speak.")
    )
    assert torch.isfinite(logps).all()
    calls = scorer.teacher_calls
    scorer.state_for(ids)
    assert scorer.teacher_calls - calls == 3  # any prefix from scratch: BOS, the condition, all splits


def test_full_student_reduces_to_the_teacher(
    pairs: dict[int, SubsetPair], teacher_lm: PreTrainedModel, tokenizer: PreTrainedTokenizerBase
) -> None:
    """With every merge the student is the teacher: covers are single tokens and P(σ) = P_T(σ)."""
    pair = pairs[max(pairs)]
    text = "O, she doth teach the torches"
    ids = tokenizer.encode(text, add_special_tokens=False)
    scorer = CrossTokenizerScorer(teacher_lm, pair)
    _, prefix = scorer.score_sequence(ids)
    with torch.no_grad():
        logits = teacher_lm(input_ids=torch.tensor([[0, *ids]])).logits[0, :-1].double()
    direct = torch.log_softmax(logits, -1).gather(1, torch.tensor(ids)[:, None]).sum()
    assert prefix == pytest.approx(float(direct), abs=1e-4)


def test_complete_sequence_likelihood_is_the_canonical_teacher_likelihood(
    pairs: dict[int, SubsetPair], teacher_lm: PreTrainedModel, tokenizer: PreTrainedTokenizerBase
) -> None:
    """σ·EOS has a single cover, T(x)·EOS: its probability is the teacher's, whatever the student."""
    text = "KING RICHARD III:\nNow is the winter"
    eos = tokenizer.eos_token_id
    teacher_ids = [*tokenizer.encode(text, add_special_tokens=False), eos]
    with torch.no_grad():
        logits = teacher_lm(input_ids=torch.tensor([[0, *teacher_ids]])).logits[0, :-1].double()
    expected = float(torch.log_softmax(logits, -1).gather(1, torch.tensor(teacher_ids)[:, None]).sum())
    for n_merges in (0, 100):
        pair = pairs[n_merges]
        scorer = CrossTokenizerScorer(teacher_lm, pair)
        ids = [*student_ids(pair, text), eos]
        assert scorer.prefix_logprob(scorer.state_for(ids)) == pytest.approx(expected, abs=1e-4)


def test_a_prefix_that_is_not_the_students_encoding_is_refused(pairs, teacher_lm) -> None:
    pair = pairs[100]
    ids = student_ids(pairs[0], "the king said")  # byte ids: valid student ids, not its encoding
    with pytest.raises(LitlabError, match="not the student tokenizer's own encoding"):
        CrossTokenizerScorer(teacher_lm, pair).state_for(ids)


def _with_pre_tokenizer(tokenizer: PreTrainedTokenizerBase, **changes) -> PreTrainedTokenizerBase:
    state = json.loads(tokenizer.backend_tokenizer.to_str())
    state["pre_tokenizer"].update(changes)
    return wrap_tokenizer(Tokenizer.from_str(json.dumps(state)))


def test_each_failed_precondition_is_named(
    tokenizer: PreTrainedTokenizerBase, shakespeare: str, lm_cache
) -> None:
    student = subset_tokenizer(tokenizer, 50)
    cases = {
        "is a Unigram tokenizer, not a BPE": (sentencepiece_unigram(shakespeare[:20_000]), student),
        "the student is not byte-level": (tokenizer, sentencepiece_bpe(shakespeare[:20_000])),
        "different pre-tokenisers": (tokenizer, _with_pre_tokenizer(student, add_prefix_space=True)),
        "not GPT-2's ByteLevel regex": (
            _with_pre_tokenizer(tokenizer, use_regex=False),
            _with_pre_tokenizer(student, use_regex=False),
        ),
        "merges are not the teacher's first 50": (
            tokenizer,
            subset_tokenizer(cached_bpe([shakespeare[100_000:]], 600, lm_cache), 50),
        ),
    }
    for message, (teacher, other) in cases.items():
        with pytest.raises(LitlabError, match=message) as error:
            SubsetPair(teacher, other)
        assert "\n" not in str(error.value)
