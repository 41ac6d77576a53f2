"""The VS reward against a hand computation over the full sequence, and the per-step judge's decisions."""

from __future__ import annotations

import torch

from litlab.datamodules.prontoqa import FALSE_TAG, TRUE_TAG, UNKNOWN_TAG
from litlab.methods.veracity.baselines import all_true, per_step_judge, random_tags
from litlab.methods.veracity.module import hide_tags
from litlab.methods.veracity.scoring import assignment_scores, fill_tags
from litlab.methods.veracity.search import all_assignments


def _reference(model: torch.nn.Module, tokens: torch.Tensor, slots: list[int], answer: int, tags: list[bool]):
    """Sum of log p(token | prefix) over the tag slots and the two answer tokens, one sequence at a time."""
    x = tokens[: answer + 1].clone()
    for slot, tag in zip(slots, tags):
        x[slot] = TRUE_TAG if tag else FALSE_TAG
    with torch.no_grad():
        logp = model(input_ids=x[None]).logits[0].double().log_softmax(-1)
    tag_part = sum(logp[s - 1, x[s]] for s in slots)
    return float(tag_part), float(logp[answer - 2, x[answer - 1]] + logp[answer - 1, x[answer]])


def test_scores_equal_the_full_sequence_likelihood(tiny_lm, chains) -> None:
    width = chains["slots"].shape[1]
    candidates = all_assignments(width, width)[None].expand(len(chains["tokens"]), -1, -1)
    with_answer = assignment_scores(tiny_lm, chains, candidates, chunk=7)
    without = assignment_scores(tiny_lm, chains, candidates, answer_term=False)
    for i in (0, 3, 5):
        n = int(chains["n_steps"][i])
        slots = chains["slots"][i, :n].tolist()
        for k in (0, 5, 2**width - 1):
            tags, answer = _reference(
                tiny_lm,
                chains["tokens"][i],
                slots,
                int(chains["answer_pos"][i]),
                candidates[i, k, :n].tolist(),
            )
            assert abs(without[i, k].item() - tags) < 1e-4
            assert abs(with_answer[i, k].item() - tags - answer) < 1e-4


def test_fill_tags_touches_only_valid_slots(chains) -> None:
    tags = torch.full((len(chains["tokens"]), 1, chains["slots"].shape[1]), UNKNOWN_TAG)
    filled = fill_tags(chains["tokens"], chains["slots"], tags)[:, 0]
    changed = filled != chains["tokens"]
    assert changed.sum(1).tolist() == chains["n_steps"].tolist()
    hidden = hide_tags(chains)
    assert hidden.shape[1] == int(chains["slots"].max()) + 1
    assert (hidden == UNKNOWN_TAG).sum().item() == chains["n_steps"].sum().item()


def test_per_step_judge_is_greedy_over_its_own_tags(tiny_lm, chains) -> None:
    judged = per_step_judge(tiny_lm, chains)
    for i in range(len(judged)):
        n = int(chains["n_steps"][i])
        x = chains["tokens"][i].clone()
        for k in range(n):
            s = int(chains["slots"][i, k])
            with torch.no_grad():
                logp = tiny_lm(input_ids=x[None, :s]).logits[0, -1]
            assert bool(judged[i, k]) == bool(logp[TRUE_TAG] >= logp[FALSE_TAG])
            x[s] = TRUE_TAG if judged[i, k] else FALSE_TAG
        assert judged[i, n:].all()


def test_trivial_baselines(chains) -> None:
    assert all_true(chains["slots"]).all()
    slots = chains["slots"].repeat(400, 1)
    tags = random_tags(slots, 0.3, seed=0)
    valid = slots >= 0
    assert abs((~tags[valid]).float().mean().item() - 0.3) < 0.02
    assert tags[~valid].all()
