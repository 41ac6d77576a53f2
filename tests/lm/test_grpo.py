"""GRPO: advantages and loss against hand calculations, clipped gradients, the k3 KL, TRL's loss, rollouts,
and a tiny LM whose reward rises under ``GRPOModule`` trained by the Fitter."""

from __future__ import annotations

import importlib.util
import math
from collections import defaultdict
from types import SimpleNamespace

import pytest
import torch

from litlab.fitting import Fitter
from litlab.lm import GRPOModule, all_tie_fraction, group_advantages, grpo_loss, grpo_rollout, prompt_loader
from litlab.lm.grpo import policy_logprobs


def test_group_advantages_by_hand() -> None:
    rewards = torch.tensor([[1.0, 0.0, 0.0, 1.0], [2.0, 2.0, 2.0, 2.0], [0.0, 0.0, 0.0, 3.0]])
    # row 0: mean 0.5, unbiased sd sqrt(4 · 0.25 / 3)
    # row 2: mean 0.75, unbiased sd sqrt((3 · 0.5625 + 5.0625) / 3) = 1.5
    sd0 = math.sqrt(1 / 3)
    expected = torch.tensor([[0.5, -0.5, -0.5, 0.5], [0.0] * 4, [-0.75, -0.75, -0.75, 2.25]]) / torch.tensor(
        [[sd0 + 1e-4], [1e-4], [1.5 + 1e-4]]
    )
    torch.testing.assert_close(group_advantages(rewards), expected)
    torch.testing.assert_close(
        group_advantages(rewards, scale=False), rewards - rewards.mean(1, keepdim=True)
    )
    assert all_tie_fraction(rewards).item() == pytest.approx(1 / 3)


def _case() -> dict[str, torch.Tensor]:
    """Two sequences: ratios 1.25 and 1 (A = 1), and 0.75 then a masked token (A = −2)."""
    return {
        "logp": torch.tensor([[0.5, 0.6], [0.3, 0.9]]).log(),
        "old_logp": torch.tensor([[0.4, 0.6], [0.4, 0.1]]).log(),
        "advantages": torch.tensor([1.0, -2.0]),
        "mask": torch.tensor([[1, 1], [1, 0]]),
    }


def test_grpo_loss_by_hand() -> None:
    case = _case()
    loss, stats = grpo_loss(**case, clip_eps=0.2)
    # row 0: −min(1.25, 1.2) and −1 → −1.1; row 1: −min(0.75·−2, 0.8·−2) = 1.6 (the masked token ignored)
    assert loss.item() == pytest.approx((-1.1 + 1.6) / 2)
    assert stats["clip_fraction"].item() == pytest.approx(2 / 3)  # both out-of-clip tokens push further
    assert stats["ratio"].item() == pytest.approx((1.25 + 1.0 + 0.75) / 3)
    assert stats["kl"].item() == 0.0
    # the k3 KL with ref = 0.25 on the first token: exp(−ln 2) + ln 2 − 1 = ln 2 − 0.5, averaged per sequence
    ref = case["logp"].clone()
    ref[0, 0] = math.log(0.25)
    with_kl, stats = grpo_loss(**case, clip_eps=0.2, ref_logp=ref, kl_coef=0.1)
    k3 = math.log(2) - 0.5
    assert with_kl.item() == pytest.approx(0.25 + 0.1 * (k3 / 2) / 2)
    assert stats["kl"].item() == pytest.approx(k3 / 3)


def test_clipped_gradient_is_zero_only_where_the_advantage_pushes_further() -> None:
    case = _case()
    logp = case.pop("logp").requires_grad_()
    grpo_loss(logp, **case, clip_eps=0.2)[0].backward()
    # out of the clip and pushed further: zero; ratio 1 with A = 1 over 2 tokens and 2 sequences: −1/4
    torch.testing.assert_close(logp.grad, torch.tensor([[0.0, -0.25], [0.0, 0.0]]))
    # the same ratios with the advantages' signs flipped pull back into the clip: gradients flow
    logp = logp.detach().requires_grad_()
    grpo_loss(logp, case["old_logp"], -case["advantages"], case["mask"], clip_eps=0.2)[0].backward()
    # d/dlogp of −ρA = −ρA: row 0 token 0: −1.25·(−1)/4; row 0 token 1: 1/4; row 1 token 0: −0.75·2/2
    torch.testing.assert_close(logp.grad, torch.tensor([[1.25 / 4, 0.25], [-0.75, 0.0]]))


def test_kl_is_zero_when_the_policy_is_the_reference() -> None:
    logp = torch.randn(4, 5).log_softmax(-1).requires_grad_()
    mask = torch.ones(4, 5)
    plain, _ = grpo_loss(logp, logp.detach(), torch.randn(4), mask)
    loss, stats = grpo_loss(
        logp, logp.detach(), torch.randn(4).zero_(), mask, ref_logp=logp.detach(), kl_coef=1.0
    )
    assert stats["kl"].item() == 0.0 and loss.item() == 0.0
    (grad,) = torch.autograd.grad(loss, logp)
    assert torch.count_nonzero(grad) == 0  # the k3 term's gradient vanishes at the reference too
    assert torch.isfinite(plain)


@pytest.mark.skipif(importlib.util.find_spec("trl") is None, reason="the optional 'rl' extra (trl) is absent")
def test_grpo_loss_matches_trl() -> None:
    """TRL's ``GRPOTrainer._compute_loss`` (loss_type="grpo", token-level ratios) on the same tensors."""
    from trl import GRPOTrainer

    torch.manual_seed(0)
    n, t = 6, 5
    logp = (torch.randn(n, t) * 0.3 - 1.0).requires_grad_()
    old, ref = logp.detach() + 0.3 * torch.randn(n, t), logp.detach() + 0.2 * torch.randn(n, t)
    mask = (torch.rand(n, t) < 0.8).long()
    mask[:, 0] = 1
    advantages = torch.randn(n)
    ours, stats = grpo_loss(logp, old, advantages, mask, clip_eps=0.2, ref_logp=ref, kl_coef=0.04)
    reduce = SimpleNamespace(reduce=lambda x, reduction: x, gather=lambda x: x)
    trainer = SimpleNamespace(
        _get_per_token_logps_and_entropies=lambda *a, **k: (logp, torch.zeros(n, t), None),
        top_entropy_quantile=1.0, off_policy_mask_threshold=None, importance_sampling_level="token",
        beta=0.04, loss_type="grpo", epsilon_low=0.2, epsilon_high=0.2, use_vllm=False,
        args=SimpleNamespace(use_bias_correction_kl=False, delta=None), model=SimpleNamespace(training=True),
        current_gradient_accumulation_steps=1, _entropy_bonus_enabled=False, aux_loss_enabled=False,
        _metrics=defaultdict(lambda: defaultdict(list)), accelerator=reduce,
    )  # fmt: skip
    inputs = {
        "prompt_ids": torch.zeros(n, 2, dtype=torch.long), "prompt_mask": torch.ones(n, 2, dtype=torch.long),
        "completion_ids": torch.zeros(n, t, dtype=torch.long), "completion_mask": mask,
        "advantages": advantages, "old_per_token_logps": old, "ref_per_token_logps": ref,
    }  # fmt: skip
    theirs = GRPOTrainer._compute_loss(trainer, None, inputs)
    torch.testing.assert_close(ours, theirs)
    (g_ours,) = torch.autograd.grad(ours, logp, retain_graph=True)
    (g_theirs,) = torch.autograd.grad(theirs, logp)
    torch.testing.assert_close(g_ours, g_theirs)
    assert stats["kl"].item() == pytest.approx(trainer._metrics["train"]["kl"][0], abs=1e-6)
    assert stats["clip_fraction"].item() == pytest.approx(
        trainer._metrics["train"]["clip_ratio/region_mean"][0]
    )


def _vowel_share(prompts: list[str], completions: list[str], **columns: list) -> torch.Tensor:
    """The toy verifiable reward: the share of a completion's letters that are vowels."""
    letters = [[c for c in text.lower() if c.isalpha()] for text in completions]
    return torch.tensor([sum(c in "aeiou" for c in cs) / max(1, len(cs)) for cs in letters])


def test_rollout_groups_rewards_and_recomputes_its_logprobs(tokenizer, tiny_lm) -> None:
    model = tiny_lm()
    seen = {}

    def reward(prompts: list[str], completions: list[str], target: list[str]) -> torch.Tensor:
        seen.update(prompts=prompts, target=target)
        return torch.tensor([float(len(c) % 3) for c in completions])

    prompts = ["ROMEO:\n", "To be, or not"]
    out = grpo_rollout(
        model, tokenizer, prompts, 3, reward, max_new_tokens=6, columns={"target": ["a", "b"]}, seed=1
    )
    assert seen["prompts"] == [prompts[0]] * 3 + [prompts[1]] * 3 and seen["target"] == ["a"] * 3 + ["b"] * 3
    assert out.rewards.shape == (2, 3) and out.advantages.shape == (6,)
    torch.testing.assert_close(out.advantages.view(2, 3), group_advantages(out.rewards))
    with torch.no_grad():
        torch.testing.assert_close(policy_logprobs(model, out), out.old_logp, atol=1e-5, rtol=0)


def test_grpo_raises_the_reward_of_a_tiny_lm(tokenizer, tiny_lm) -> None:
    """Thirty GRPO steps on a random 2 × d32 LM (1–2 s): the vowel share of its 4-token completions rises
    from 0.39–0.41 to 0.71–0.87 (first vs last ten steps, seeds 1–4 measured); asserted: a gain > 0.15."""
    torch.manual_seed(0)
    records = [{"prompt": p} for p in ["ROMEO:\n", "JULIET:\n", "First Citizen:\n", "KING:\n"] * 4]
    module = GRPOModule(
        _vowel_share, model=tiny_lm(seed=0).train(), tokenizer=tokenizer, group_size=8, max_new_tokens=4,
        lr=2e-2, num_iterations=2, kl_coef=0.01, seed=0,
    )  # fmt: skip
    result = Fitter().fit(module, prompt_loader(records, batch_size=8), max_steps=30, val_every_n_steps=10)
    rewards = [row["train/reward"] for row in result.history]
    assert rewards[-1] > rewards[0] + 0.15, rewards
    assert {"train/kl", "train/clip_fraction", "train/all_tie"} <= set(result.history[-1])
