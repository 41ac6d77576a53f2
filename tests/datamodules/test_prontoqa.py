"""The ProntoQA-style generator: gold labels and answers checked by forward chaining on the rendered text,
edge splits disjoint, shapes and the LM batches."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from litlab.core.errors import ConfigError
from litlab.datamodules.prontoqa import (
    CONCEPTS,
    FALSE_TAG,
    ID,
    PAD,
    TRUE_TAG,
    ProblemConfig,
    ProntoQADataModule,
    allowed_edges,
    decode,
    encode,
    generate_problems,
    lm_rows,
)


def _facts(text: str) -> tuple[dict, dict, str, str]:
    """Parse a problem's context: is-a edges, properties per concept, the entity and its base concept."""
    context = text.split(" query ")[0].replace("<eos>", "").split(" . ")
    edges, props, entity, base = {}, {}, None, None
    for fact in (f.strip(" .").split() for f in context if f.strip(" .")):
        if fact[0] == "every" and fact[-1] in CONCEPTS:
            edges.setdefault(fact[1], []).append(fact[3])
        elif fact[0] == "every":
            props.setdefault(fact[1], {})[fact[-1]] = fact[3] != "not"
        else:
            entity, base = fact[0], fact[2]
    return edges, props, entity, base


def _truths(text: str) -> tuple[list[bool], bool]:
    """Forward chaining: the truth of every proof step and of the query."""
    edges, props, entity, base = _facts(text)
    ancestors, frontier = {base}, [base]
    while frontier:
        for parent in edges.get(frontier.pop(), []):
            if parent not in ancestors:
                ancestors.add(parent)
                frontier.append(parent)
    known = {p: v for c in ancestors for p, v in props.get(c, {}).items()}
    query = text.split(" query ")[1].split()[2]
    steps = text.split(" ? ")[1].split(" answer ")[0]
    truths = []
    for step in steps.replace("<T>", "|").replace("<F>", "|").split("|")[:-1]:
        words = step.strip(" .").split()
        assert words[0] == entity
        if words[-1] in CONCEPTS:
            truths.append(words[-1] in ancestors)
        else:
            truths.append(known[words[-1]] == (words[2] != "not"))
    return truths, known[query]


@pytest.mark.parametrize("config", [ProblemConfig(), ProblemConfig(split="heldout"), ProblemConfig(5, 7)])
def test_labels_and_answers_match_forward_chaining(config: ProblemConfig) -> None:
    batch = generate_problems(300, config, seed=3)
    for i in range(300):
        text = decode(batch["tokens"][i])
        truths, answer = _truths(text)
        n = int(batch["n_steps"][i])
        assert len(truths) == n
        assert batch["labels"][i, :n].tolist() == [int(t) for t in truths]
        assert bool(batch["answer"][i]) == answer
        assert text.endswith(f"answer {'true' if answer else 'false'} <eos>")


def test_layout_and_corruption_rates() -> None:
    batch = generate_problems(4000, ProblemConfig(depth_min=2, depth_max=4, clean_fraction=0.25), seed=0)
    rows = torch.arange(4000)[:, None]
    valid = batch["slots"] >= 0
    tags = batch["tokens"][rows, batch["slots"].clamp_min(0)]
    assert torch.equal(tags[valid], torch.where(batch["labels"] == 1, TRUE_TAG, FALSE_TAG)[valid])
    assert torch.equal(batch["labels"][valid] == 0, batch["kind"][valid] > 0)
    assert (batch["tokens"][torch.arange(4000), batch["answer_pos"] - 1] == ID["answer"]).all()
    assert set(batch["n_steps"].unique().tolist()) == {3, 4, 5}
    clean = ((batch["labels"] == 0).sum(1) == 0).float().mean().item()
    assert abs(clean - 0.25) < 0.03
    assert abs(batch["answer"].float().mean().item() - 0.5) < 0.03
    assert ((batch["labels"] == 0).sum(1) <= 2).all()
    assert (batch["tokens"] >= 0).all() and (batch["tokens"][:, 0] != PAD).all()


def test_generation_is_seeded() -> None:
    a, b = generate_problems(50, ProblemConfig(), 5), generate_problems(50, ProblemConfig(), 5)
    c = generate_problems(50, ProblemConfig(), 6)
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert not torch.equal(a["tokens"], c["tokens"])


def test_heldout_ontologies_use_only_heldout_edges() -> None:
    train, held = allowed_edges("train"), allowed_edges("heldout")
    assert not (train & held).any()
    index = {c: i for i, c in enumerate(CONCEPTS)}
    for split, allowed in (("train", train), ("heldout", held)):
        batch = generate_problems(200, ProblemConfig(split=split), seed=1)
        for i in range(200):
            edges, _, _, _ = _facts(decode(batch["tokens"][i]))
            assert all(allowed[index[a], index[b]] for a, parents in edges.items() for b in parents)


def test_text_round_trip_and_errors() -> None:
    text = "max is wumpus . <T>"
    assert decode(encode(text)) == text
    with pytest.raises(ConfigError, match="vocabulary"):
        encode("max is a dragon")
    with pytest.raises(ConfigError, match="depth"):
        generate_problems(4, ProblemConfig(depth_min=5, depth_max=3), 0)
    with pytest.raises(ConfigError, match="split"):
        ProntoQADataModule(split="test")


def test_datamodule_batches_supervise_only_the_proof() -> None:
    data = ProntoQADataModule(train_size=64, eval_size=16, batch_size=8, seed=0)
    spec = data.data_spec()
    inputs, labels = next(iter(data.train_dataloader()))
    assert inputs.shape[0] == 8 and spec["block_size"] >= inputs.shape[1]
    batch = generate_problems(8, ProblemConfig(), 0)
    _, lab = lm_rows(batch)
    start = batch["loss_start"]
    for i in range(8):
        assert (lab[i, : start[i]] == -100).all()
        assert (lab[i, start[i] : batch["answer_pos"][i] + 2] >= 0).all()
    assert np.isin(labels[labels >= 0].numpy(), np.arange(len(ID))).all()
