"""The RL stage's verifiable side: pipeline QA as closed-book prompts and the binary exact-match reward,
in TRL's reward signature, for ``litlab.lm.grpo_module.GRPOModule`` (GRPO itself is the shared substrate's).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from litlab.lm.evaluation import normalize_answer

PROMPT = "Question: {question}\nAnswer:"


def qa_prompt(question: str) -> str:
    """The closed-book prompt of a question (the model answers on the same line, then a newline)."""
    return PROMPT.format(question=question)


def prompt_records(qa: Sequence[Mapping[str, Any]]) -> list[dict[str, str]]:
    """GRPO prompt records ``{prompt, answer}`` of pipeline QA pairs (``answer`` reaches the reward)."""
    return [{"prompt": qa_prompt(p["question"]), "answer": p["answer"]} for p in qa]


def exact_match_reward(
    prompts: Sequence[str], completions: Sequence[str], answer: Sequence[str], **_: Any
) -> list[float]:
    """1.0 where a completion's first line equals the reference answer (case, spaces and a final period
    ignored), else 0.0: the paper's binary verifiable reward with string equality as the judge."""
    return [
        float(normalize_answer(c) == normalize_answer(a)) for c, a in zip(completions, answer, strict=True)
    ]
