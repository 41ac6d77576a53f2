"""A local causal LM (litlab's tiny LMs or any local Hugging Face checkpoint) as a subject.

The conversation is rendered by the tokenizer's chat template (``litlab.lm.render_chat``); the reply is the
greedy continuation and the label log-probs are read from the next-token distribution at the end of the
prompt (each label's first token, with or without a leading space), in one forward pass per batch.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from litlab.methods.metacog.backends import Query, Reply


class LocalLMBackend:
    """Greedy replies of ``model`` with first-token label log-probs; ``max_new_tokens`` bounds a reply."""

    def __init__(
        self,
        model: PreTrainedModel,
        tokenizer: PreTrainedTokenizerBase,
        max_new_tokens: int = 4,
        name: str = "local",
    ) -> None:
        self.model, self.tokenizer, self.max_new_tokens = model.eval(), tokenizer, max_new_tokens
        self.name = name

    @classmethod
    def from_pretrained(cls, path: str, max_new_tokens: int = 4) -> LocalLMBackend:
        """A backend for a local checkpoint folder (ours or any HF causal LM)."""
        from litlab.lm import load_pretrained

        model, tokenizer = load_pretrained(path)
        return cls(model, tokenizer, max_new_tokens, name=f"local:{path}")

    def label_ids(self, label: str) -> list[int]:
        """The first tokens the model may write ``label`` with: ``label`` itself and, where the tokenizer has
        a token for it, ``label`` after a space (most HF models answer "Answer:" with " B"); a bare-space
        first token, shared by every label, is not counted."""
        encode = self.tokenizer.backend_tokenizer.encode
        ids = []
        for text in (label, f" {label}"):
            first = encode(text, add_special_tokens=False).ids[0]
            if self.tokenizer.decode([first]).strip() and first not in ids:
                ids.append(first)
        return ids

    def label_logprobs(self, logp: torch.Tensor, labels: Sequence[str]) -> dict[str, float]:
        """log p(the reply starts with ``label``) from a next-token ``logp (V,)``: the log-sum-exp over the
        label's first-token variants (``label_ids``)."""
        return {label: float(logp[self.label_ids(label)].logsumexp(0)) for label in labels}

    @torch.no_grad()
    def complete(self, queries: Sequence[Query]) -> list[Reply]:
        """Greedy replies and label log-probs for a batch of queries."""
        from litlab.lm import generate_text, render_chat
        from litlab.lm.generation import encode_prompts
        from litlab.lm.models import position_ids

        if not queries:
            return []
        prompts = [render_chat(self.tokenizer, q.messages, add_generation_prompt=True) for q in queries]
        device = next(self.model.parameters()).device
        ids, mask = encode_prompts(self.tokenizer, prompts, device)
        logits = self.model(input_ids=ids, attention_mask=mask, position_ids=position_ids(mask)).logits[:, -1]
        logp = torch.log_softmax(logits.float(), -1).cpu()
        texts = generate_text(self.model, self.tokenizer, prompts, self.max_new_tokens)
        return [
            Reply(text, self.label_logprobs(logp[i], q.labels))
            for i, (q, text) in enumerate(zip(queries, texts, strict=True))
        ]
