"""The testbed's post-training loops that are not next-token fine-tuning (plain torch, on a HF causal LM):

- ``reinforce``: a toy RL fine-tune (REINFORCE with a group-mean baseline, GRPO-style groups) on a verifiable
  reward: the answer to a procedural one-digit addition, scored by position-wise character match.
- ``train_projector``: a "multimodal" extension (LLaVA-style): a new 2-layer MLP projector maps features of
  a fixed random "vision encoder" into one prefix embedding; trained alone, then jointly with the LM.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from transformers import PreTrainedModel, PreTrainedTokenizerBase


def arithmetic_problems(n: int, generator: torch.Generator) -> tuple[list[str], list[str]]:
    """``n`` prompts ``"a+b="`` (one-digit a, b) and their answers ``"a+b"`` as decimal strings."""
    a, b = torch.randint(0, 10, (2, n), generator=generator).tolist()
    return [f"{x}+{y}=" for x, y in zip(a, b)], [str(x + y) for x, y in zip(a, b)]


def arithmetic_text(n: int, generator: torch.Generator) -> str:
    """``n`` solved problems, one per line (the warm-up corpus that makes digits reachable)."""
    prompts, answers = arithmetic_problems(n, generator)
    return "".join(f"{p}{a}\n" for p, a in zip(prompts, answers))


def arithmetic_reward(completions: list[str], answer: str) -> torch.Tensor:
    """``(n,)`` the share of ``answer``'s characters each completion has at the same position (a verifiable
    partial credit: 1.0 for an exact answer, 0.5 for '13' when the answer is '12')."""
    hits = [sum(c[i : i + 1] == ch for i, ch in enumerate(answer)) / len(answer) for c in completions]
    return torch.tensor(hits, dtype=torch.float32)


def _completion_logprob(model: PreTrainedModel, sequences: torch.Tensor, prompt_len: int) -> torch.Tensor:
    """``(G,)`` the summed log-probability of each sequence's tokens after ``prompt_len``."""
    logits = model(input_ids=sequences).logits[:, prompt_len - 1 : -1]
    targets = sequences[:, prompt_len:]
    return logits.log_softmax(-1).gather(-1, targets[..., None])[..., 0].sum(-1)


def reinforce_loss(
    model: PreTrainedModel, sequences: torch.Tensor, prompt_len: int, reward: torch.Tensor
) -> torch.Tensor:
    """REINFORCE with a group-mean baseline: −mean((r − mean r)·log π(completion)) over the group."""
    return -((reward - reward.mean()) * _completion_logprob(model, sequences, prompt_len)).mean()


@torch.no_grad()
def _sample(model: PreTrainedModel, prompt: torch.Tensor, group: int, tokens: int, g: torch.Generator):
    """``(group, P + tokens)``: ``group`` temperature-1 continuations of ``prompt`` ``(P,)``."""
    seq = prompt.expand(group, -1)
    for _ in range(tokens):
        probs = model(input_ids=seq).logits[:, -1].float().softmax(-1)
        seq = torch.cat([seq, torch.multinomial(probs, 1, generator=g)], 1)
    return seq


def reinforce(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    steps: int,
    generator: torch.Generator,
    group: int = 16,
    tokens: int = 2,
    lr: float = 1e-3,
) -> list[float]:
    """REINFORCE on one-digit addition: each step samples ``group`` answers to one problem, advantage =
    reward − the group mean, loss = −mean(advantage · log π(answer)); AdamW. Returns each step's mean
    reward."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    model.train()
    rewards = []
    for _ in range(steps):
        prompts, answers = arithmetic_problems(1, generator)
        prompt = torch.tensor(tokenizer(prompts[0], add_special_tokens=False)["input_ids"])
        seq = _sample(model, prompt, group, tokens, generator)
        reward = arithmetic_reward(tokenizer.batch_decode(seq[:, len(prompt) :]), answers[0])
        loss = reinforce_loss(model, seq, len(prompt), reward)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        rewards.append(float(reward.mean()))
    model.eval()
    return rewards


@dataclass(frozen=True)
class Scenes:
    """Synthetic image–caption data: ``classes`` (colour, shape) scenes; a fixed random "vision encoder"
    turns scene c into ``centres[c]`` plus noise (``feature_dim`` floats)."""

    centres: torch.Tensor  # (classes, feature_dim)
    captions: list[str]

    @classmethod
    def make(cls, generator: torch.Generator, feature_dim: int = 32) -> Scenes:
        colours, shapes = ("red", "green", "blue", "white"), ("circle", "square", "star", "crown")
        captions = [f"a {c} {s}\n" for c in colours for s in shapes]
        return cls(torch.randn(len(captions), feature_dim, generator=generator), captions)

    def batch(self, n: int, generator: torch.Generator) -> tuple[torch.Tensor, list[int]]:
        """``(n, feature_dim)`` noisy features and their scene ids."""
        ids = torch.randint(0, len(self.captions), (n,), generator=generator)
        noise = 0.3 * torch.randn(n, self.centres.shape[1], generator=generator)
        return self.centres[ids] + noise, ids.tolist()


def projector(feature_dim: int, hidden: int) -> nn.Sequential:
    """LLaVA-1.5's projector shape: Linear → GELU → Linear, feature_dim → hidden."""
    return nn.Sequential(nn.Linear(feature_dim, hidden), nn.GELU(), nn.Linear(hidden, hidden))


def caption_loss(
    model: PreTrainedModel,
    proj: nn.Module,
    caption_ids: torch.Tensor,
    features: torch.Tensor,
) -> torch.Tensor:
    """Mean NLL of ``caption_ids`` ``(n, T)`` after one projected image embedding (the prefix)."""
    prefix = proj(features)[:, None]
    embeds = torch.cat([prefix, model.get_input_embeddings()(caption_ids)], 1)
    logits = model(inputs_embeds=embeds).logits[:, :-1]
    return nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), caption_ids.reshape(-1))


def caption_ids(tokenizer: PreTrainedTokenizerBase, scenes: Scenes) -> torch.Tensor:
    """``(classes, T)`` every caption's tokens, right-padded with the last token (the newline)."""
    rows = [tokenizer(c, add_special_tokens=False)["input_ids"] for c in scenes.captions]
    width = max(map(len, rows))
    return torch.tensor([r + r[-1:] * (width - len(r)) for r in rows])


def train_projector(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    steps: int,
    generator: torch.Generator,
    batch_size: int = 16,
    lr: float = 3e-3,
    lm_lr: float = 3e-4,
) -> tuple[nn.Sequential, Scenes, list[float]]:
    """LLaVA's two stages on captions of synthetic scenes: ``steps`` steps of the new projector alone (LM
    frozen, ``lr``), then ``steps`` steps of both (the LM at ``lm_lr``); AdamW. Returns the projector, the
    scenes and each step's caption loss."""
    scenes = Scenes.make(generator)
    proj = projector(scenes.centres.shape[1], model.config.hidden_size)
    ids = caption_ids(tokenizer, scenes)
    model.train()
    losses = []
    for stage in ("projector", "joint"):
        model.requires_grad_(stage == "joint")
        groups = [{"params": list(proj.parameters()), "lr": lr}]
        if stage == "joint":
            groups.append({"params": list(model.parameters()), "lr": lm_lr})
        optimizer = torch.optim.AdamW(groups, weight_decay=0.0)
        for _ in range(steps):
            features, scene = scenes.batch(batch_size, generator)
            loss = caption_loss(model, proj, ids[scene], features)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
    model.eval()
    return proj, scenes, losses
