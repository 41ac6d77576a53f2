"""The testbed's RL, projector ("multimodal") and MoE-upcycling children: each is built as described."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

from litlab.datamodules.tokenizers import cached_bpe
from litlab.lm import build_lm, llama_config
from litlab.methods.fingerprint import derive, posttrain
from litlab.methods.fingerprint.baselines import huref_invariants, pcs, reef
from litlab.methods.fingerprint.score import awm_score

VOCAB = json.dumps({"model": {"vocab": {f"t{i}": i for i in range(300)}}, "added_tokens": []})


def _model(seed: int, vocab: int = 300, hidden: int = 32):
    torch.manual_seed(seed)
    return build_lm(llama_config(vocab, hidden, 2, 4, initializer_range=0.05)).eval()


@pytest.fixture(scope="module")
def tokenizer():
    g = torch.Generator().manual_seed(0)
    text = posttrain.arithmetic_text(300, g) + "".join(posttrain.Scenes.make(g).captions) * 20
    return cached_bpe([text], 280)


def test_moe_upcycling_copies_the_ffn_into_experts_and_keeps_attention(tmp_path: Path) -> None:
    dense = _model(0)
    moe = derive.upcycle_moe(dense, torch.Generator().manual_seed(1), experts=4, top_k=2).eval()
    ids = torch.randint(0, 300, (2, 12))
    with torch.no_grad():  # top-k weights renormalised over identical experts: the dense function
        assert torch.allclose(moe(ids).logits, dense(ids).logits, atol=1e-5)
    dense_state, moe_state = dense.state_dict(), moe.state_dict()
    for name, w in dense_state.items():
        if ".mlp." not in name:
            assert torch.equal(moe_state[name], w), name
    for i, block in enumerate(dense.model.layers):
        experts = moe.model.layers[i].mlp.experts
        gate_up = torch.cat([block.mlp.gate_proj.weight, block.mlp.up_proj.weight])
        assert all(torch.equal(experts.gate_up_proj[e], gate_up) for e in range(4))
        assert all(torch.equal(experts.down_proj[e], block.mlp.down_proj.weight) for e in range(4))
        assert moe.model.layers[i].mlp.gate.weight.shape == (4, 32)
    for name, model in (("dense", dense), ("moe", moe)):
        model.save_pretrained(tmp_path / name)
        (tmp_path / name / "tokenizer.json").write_text(VOCAB)
    # saved with Mixtral keys; AWM reads its attention through the Llama layout: untouched, so exactly 1
    assert awm_score(tmp_path / "dense", tmp_path / "moe").score == pytest.approx(1.0, abs=1e-6)
    assert math.isnan(pcs(tmp_path / "dense", tmp_path / "moe"))  # tensor names differ
    assert math.isfinite(huref_invariants(tmp_path / "dense", tmp_path / "moe"))  # attention invariants only


def test_arithmetic_reward_is_positional_character_match() -> None:
    reward = posttrain.arithmetic_reward(["12\n", "13", "x2", "1", "", "21"], "12")
    assert reward.tolist() == [1.0, 0.5, 0.5, 0.5, 0.0, 0.0]
    prompts, answers = posttrain.arithmetic_problems(50, torch.Generator().manual_seed(0))
    assert all(sum(map(int, p[:-1].split("+"))) == int(a) for p, a in zip(prompts, answers))


def test_a_reinforce_step_moves_probability_to_rewarded_answers(tokenizer) -> None:
    model = _model(2, vocab=len(tokenizer))
    prompt = torch.tensor(tokenizer("3+4=", add_special_tokens=False)["input_ids"])
    seq = torch.cat([prompt.expand(4, -1), torch.randint(0, len(tokenizer), (4, 2))], 1)
    reward = torch.tensor([1.0, 0.0, 0.0, 0.5])
    before = posttrain._completion_logprob(model, seq, len(prompt)).detach()
    posttrain.reinforce_loss(model, seq, len(prompt), reward).backward()
    with torch.no_grad():
        for p in model.parameters():
            p -= 0.05 * p.grad
    change = posttrain._completion_logprob(model, seq, len(prompt)).detach() - before
    assert change[0] > 0 and change[0] > change[1] and change[0] > change[2]


def test_reinforce_fine_tunes_the_lm_and_logs_rewards(tokenizer) -> None:
    model = _model(3, vocab=len(tokenizer))
    start = {k: v.clone() for k, v in model.state_dict().items()}
    rewards = posttrain.reinforce(model, tokenizer, 5, torch.Generator().manual_seed(0), group=8)
    assert len(rewards) == 5 and all(0.0 <= r <= 1.0 for r in rewards)
    assert any(not torch.equal(model.state_dict()[k], v) for k, v in start.items())


def test_projector_trains_alone_then_with_the_lm(tokenizer) -> None:
    model = _model(4, vocab=len(tokenizer))
    start = {k: v.clone() for k, v in model.state_dict().items()}
    proj, scenes, losses = posttrain.train_projector(model, tokenizer, 25, torch.Generator().manual_seed(0))
    assert len(losses) == 50 and proj(scenes.centres).shape == (len(scenes.captions), 32)
    assert sum(losses[-5:]) < sum(losses[:5])  # the captions are learned through the projected prefix
    assert any(not torch.equal(model.state_dict()[k], v) for k, v in start.items())  # stage 2 moved the LM


def test_reef_is_one_for_a_permuted_copy_and_runs_both_models(tmp_path: Path, tokenizer) -> None:
    base = _model(5, vocab=len(tokenizer))
    models = {"base": base, "perm": derive.permute_hidden(base, torch.Generator().manual_seed(0))[0]}
    for name, model in models.items():
        model.save_pretrained(tmp_path / name)
        tokenizer.save_pretrained(tmp_path / name)
    texts = ["1+2=3\n", "a red star\n", "9+9=18\n", "a blue crown\n", "4+0=4\n"]
    assert reef(tmp_path / "base", tmp_path / "perm", texts) == pytest.approx(1.0, abs=1e-6)
